import { describe, expect, it } from 'vitest';
import { prefixEnd, type QueueListingRepository } from '../../storage/queue-listing.repository.js';
import { MAX_ROTATIONS, PrefixRotations, ROTATION_BATCH } from './prefix-rotations.js';

/** The ready set as a sorted list, read as the repository reads it (after the cursor, then wrapping), counting the reads. */
function readySet(ids: string[]): { listing: QueueListingRepository; ready: Set<string>; reads: () => number } {
  const ready = new Set(ids);
  let reads = 0;
  const listing = {
    readyQueues: (prefix: string, after: string | null, limit: number): Promise<string[]> => {
      reads += 1;
      const under = [...ready].filter((id) => id >= prefix && id < prefixEnd(prefix)).sort();
      const from = after ?? '';
      return Promise.resolve([...under.filter((id) => id > from), ...under.filter((id) => id <= from)].slice(0, limit));
    },
  } as unknown as QueueListingRepository;
  return { listing, ready, reads: () => reads };
}

const take = async (r: PrefixRotations, prefix: string, n: number): Promise<(string | undefined)[]> => {
  const out: (string | undefined)[] = [];
  for (let i = 0; i < n; i++) out.push((await r.next(prefix))?.queueId);
  return out;
};

describe('PrefixRotations', () => {
  it('hands out the ready queues under the prefix in id order, round and round, only those under it', async () => {
    const { listing } = readySet(['t-b', 't-a', 't-c', 'u-a', 't']);
    const r = new PrefixRotations(listing);
    expect(await take(r, 't-', 7)).toEqual(['t-a', 't-b', 't-c', 't-a', 't-b', 't-c', 't-a']);
    expect(await take(r, 'u-', 2)).toEqual(['u-a', 'u-a']);
  });

  it('reads a batch at a time: K pops over K > batch queues serve K different queues, one read per batch', async () => {
    const ids = Array.from({ length: ROTATION_BATCH * 3 + 5 }, (_, i) => `q-${String(i).padStart(4, '0')}`);
    const { listing, reads } = readySet(ids);
    const r = new PrefixRotations(listing);
    const served = await take(r, 'q-', ids.length);
    expect(served).toEqual(ids);
    expect(reads()).toBe(4);
    // The next round starts again at the first.
    expect((await r.next('q-'))?.queueId).toBe(ids[0]);
  });

  it('concurrent callers share one read and take different queues', async () => {
    const { listing, reads } = readySet(['p-1', 'p-2', 'p-3']);
    const r = new PrefixRotations(listing);
    const before = r.reads;
    const got = await Promise.all([r.next('p-'), r.next('p-'), r.next('p-')]);
    expect(got).toEqual(['p-1', 'p-2', 'p-3'].map((queueId) => ({ queueId, read: before + 1 })));
    expect(reads()).toBe(1);
    expect(r.reads).toBe(before + 1);
  });

  it('a queue that becomes ready joins the round after the batch read; one no longer ready leaves it at the next read', async () => {
    const { listing, ready } = readySet(['r-a', 'r-c']);
    const r = new PrefixRotations(listing);
    expect(await take(r, 'r-', 2)).toEqual(['r-a', 'r-c']);
    ready.add('r-b');
    ready.delete('r-c');
    expect(await take(r, 'r-', 4)).toEqual(['r-a', 'r-b', 'r-a', 'r-b']);
  });

  it('answers undefined when nothing under the prefix is ready, and picks up once something is', async () => {
    const { listing, ready } = readySet([]);
    const r = new PrefixRotations(listing);
    expect(await r.next('e-')).toBeUndefined();
    ready.add('e-1');
    expect((await r.next('e-'))?.queueId).toBe('e-1');
  });

  it(`remembers at most ${MAX_ROTATIONS} prefixes, forgetting the least recently used`, async () => {
    const { listing } = readySet(['a-1', 'a-2']);
    const r = new PrefixRotations(listing);
    expect((await take(r, 'a-', 1))[0]).toBe('a-1');
    for (let i = 0; i < MAX_ROTATIONS; i++) await r.next(`x${i}-`);
    expect(r.size).toBe(MAX_ROTATIONS);
    // Forgotten: the round starts again from the first queue.
    expect((await take(r, 'a-', 1))[0]).toBe('a-1');
  });
});

describe('prefixEnd', () => {
  it('is the least string above every string that starts with the prefix, in byte order', () => {
    expect(prefixEnd('tenant-')).toBe('tenant.');
    expect(prefixEnd('z')).toBe('{');
    for (const id of ['tenant-', 'tenant-zzz', 'tenant-~']) expect(id < prefixEnd('tenant-')).toBe(true);
    expect('tenant.' < prefixEnd('tenant-')).toBe(false);
  });
});
