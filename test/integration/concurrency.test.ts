import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { QueueStateRepository } from '../../src/storage/queue-state.repository.js';
import { answer, Answer, drain, groupBy, range, seededRandom, sleep, testSeed, until, within } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';
import { closeServicePair, startServicePair } from '../support/service-pair.js';

/**
 * Concurrency of the actor turn: many clients on one queue, two service processes on one
 * database, and the bound on a queue's waiting line.
 *
 * Items carry where they came from: queue index `q`, writer `w`, priority `p`, sequence `s`
 * (per writer and priority, pushed by ONE sequential client, so FIFO is defined per stream),
 * and the test phase `ph`.
 */
interface Item {
  q: number;
  w: number;
  p: number;
  s: number;
  ph: number;
}

const streamOf = (i: Item): string => `q${i.q}/w${i.w}/p${i.p}`;

/** A pop as a reader saw it. */
interface PopRecord {
  via: string;
  depth: number;
  status: number;
  items: Item[];
  body: unknown;
  /** Per stream, how many of its items had been acknowledged (200) when the pop was sent. */
  ackedAtSend?: Map<string, number>;
}

const seed = testSeed();
const rnd = seededRandom(seed);
const where = `(seed ${seed}, ${databaseKind})`;

/**
 * What must hold inside one pop response, whatever else runs concurrently (a pop is one actor
 * turn): the right shape, at most `depth` items, priorities non-decreasing, and within a
 * priority the items of one sequential writer consecutive and increasing.
 */
function checkPop(rec: PopRecord, label: string): string[] {
  const problems: string[] = [];
  if (rec.status !== 200) return [`${label}: pop via ${rec.via} answered ${rec.status} ${JSON.stringify(rec.body)}`];
  const body = rec.body as { count?: unknown; items?: unknown };
  if (!Array.isArray(body.items) || body.count !== body.items.length) problems.push(`${label}: count ${String(body.count)} does not match items`);
  if (rec.items.length > rec.depth) problems.push(`${label}: ${rec.items.length} items for depth ${rec.depth}`);
  for (let i = 1; i < rec.items.length; i++) {
    if (rec.items[i].p < rec.items[i - 1].p) problems.push(`${label}: priority ${rec.items[i].p} after ${rec.items[i - 1].p} in one pop`);
  }
  for (const [stream, items] of groupBy(rec.items, streamOf)) {
    for (let i = 1; i < items.length; i++) {
      if (items[i].s !== items[i - 1].s + 1) {
        problems.push(`${label}: ${stream} popped ${items.map((x) => x.s).join(',')} in one pop (not consecutive)`);
        break;
      }
    }
  }
  return problems;
}

/** Every stream's popped sequence numbers, sorted, must be exactly 0..n-1: nothing lost, nothing twice. */
function checkExactlyOnce(popped: Item[], expected: Map<string, number>): string[] {
  const problems: string[] = [];
  const byStream = groupBy(popped, streamOf);
  for (const [stream, n] of expected) {
    const seqs = (byStream.get(stream) ?? []).map((i) => i.s).sort((a, b) => a - b);
    const want = range(n);
    if (JSON.stringify(seqs) !== JSON.stringify(want)) {
      const missing = want.filter((s) => !seqs.includes(s));
      const dup = seqs.filter((s, i) => i > 0 && seqs[i - 1] === s);
      problems.push(`${stream}: ${seqs.length}/${n} popped; missing [${missing.join(',')}], twice [${dup.join(',')}]`);
    }
  }
  for (const stream of byStream.keys()) if (!expected.has(stream)) problems.push(`${stream}: popped but never pushed`);
  return problems;
}

/** In pop order, each stream's sequence numbers must be exactly 0, 1, 2, … (strict FIFO, no gap, no repeat). */
function checkStrictFifo(poppedInOrder: Item[], expected: Map<string, number>): string[] {
  const problems: string[] = [];
  const byStream = groupBy(poppedInOrder, streamOf);
  for (const [stream, n] of expected) {
    const seqs = (byStream.get(stream) ?? []).map((i) => i.s);
    if (JSON.stringify(seqs) !== JSON.stringify(range(n))) problems.push(`${stream}: popped in order ${seqs.join(',')} (want 0..${n - 1})`);
  }
  return problems;
}

/**
 * A pop that answered fewer items than its depth emptied the queue in its turn; so every item
 * acknowledged before that pop was sent must have been popped by then (pops sequential).
 */
function checkEmptyMeansEmpty(pops: PopRecord[], label: string): string[] {
  const problems: string[] = [];
  const poppedSoFar = new Map<string, number>();
  for (const [k, rec] of pops.entries()) {
    for (const item of rec.items) poppedSoFar.set(streamOf(item), (poppedSoFar.get(streamOf(item)) ?? 0) + 1);
    if (rec.status !== 200 || rec.items.length >= rec.depth || !rec.ackedAtSend) continue;
    for (const [stream, acked] of rec.ackedAtSend) {
      const seen = poppedSoFar.get(stream) ?? 0;
      if (seen < acked)
        problems.push(
          `${label} pop #${k} via ${rec.via} returned ${rec.items.length}/${rec.depth} items, but ${stream} had ${acked} acknowledged and only ${seen} popped`,
        );
    }
  }
  return problems;
}

const itemsOf = (res: Answer): Item[] => (Array.isArray(res.body?.items) ? (res.body.items as Item[]) : []);

describe('concurrency', () => {
  let A: TestService;
  let B: TestService;

  // Small segments, so that segments roll over (and get deleted) all the time.
  beforeAll(async () => ({ A, B } = await startServicePair({ env: { SEGMENT_SIZE: '5' } })));
  afterAll(() => closeServicePair({ A, B }));

  describe('one instance, one queue', () => {
    it('50 concurrent pops racing 3 sequential pushers: every item popped exactly once, FIFO inside each pop', async () => {
      const q = uniqueQueueId('race');
      const PER_PRIORITY = 17;
      const problems: string[] = [];
      let acked = 0;
      let pushersDone = false;

      const pushers = Promise.all(
        [0, 1, 2].map(async (p) => {
          for (let s = 0; s < PER_PRIORITY; s++) {
            const res = await answer(A.http.post(`/queue/${q}/push`).send({ item: { q: 0, w: 0, p, s, ph: 1 }, priority: p }));
            if (res.status !== 200) problems.push(`push p${p} s${s}: ${res.status} ${JSON.stringify(res.body)}`);
            if (res.status === 0) return; // stalled: stop this client, the problem is recorded
            acked += 1;
          }
        }),
      ).finally(() => (pushersDone = true));

      // 50 pops in flight at once, released as pushes are acknowledged so they overlap the pushes.
      const pops = Promise.all(
        range(50).map(async (i): Promise<PopRecord> => {
          await until(() => pushersDone || acked >= i);
          const depth = 1 + (i % 3);
          const res = await answer(A.http.post(`/queue/${q}/pop?depth=${depth}`));
          return { via: 'A', depth, status: res.status, items: itemsOf(res), body: res.body };
        }),
      );
      const [, records] = await Promise.all([pushers, pops]);

      for (const [i, rec] of records.entries()) problems.push(...checkPop(rec, `pop ${i}`));
      const rest = await drain<Item>(A.http, q);
      problems.push(...checkPop({ via: 'A', depth: Infinity, status: 200, items: rest, body: { items: rest, count: rest.length } }, 'drain'));
      const popped = records.flatMap((r) => r.items).concat(rest);
      problems.push(...checkExactlyOnce(popped, new Map([0, 1, 2].map((p) => [`q0/w0/p${p}`, PER_PRIORITY]))));

      expect(problems, where).toEqual([]);
      // The race really happened: a good share of the concurrent pops found items.
      expect(records.filter((r) => r.items.length > 0).length, where).toBeGreaterThanOrEqual(10);
      const info = await answer(A.http.get(`/queue/${q}`));
      expect(info.status).toBe(200);
      expect(info.body.count).toBe(0);
    });

    it('one sequential reader against 3 concurrent sequential pushers: strict FIFO per priority', async () => {
      const q = uniqueQueueId('fifo');
      const PER_PRIORITY = 20;
      const problems: string[] = [];
      const acked = new Map<string, number>();
      let pushersDone = false;

      const pushers = Promise.all(
        [0, 1, 2].map(async (p) => {
          for (let s = 0; s < PER_PRIORITY; s++) {
            const res = await answer(A.http.post(`/queue/${q}/push`).send({ item: { q: 0, w: 0, p, s, ph: 2 }, priority: p }));
            if (res.status === 0) return void problems.push(`push p${p} s${s}: ${JSON.stringify(res.body)}`);
            if (res.status !== 200) problems.push(`push p${p} s${s}: ${res.status} ${JSON.stringify(res.body)}`);
            else acked.set(`q0/w0/p${p}`, (acked.get(`q0/w0/p${p}`) ?? 0) + 1);
          }
        }),
      ).finally(() => (pushersDone = true));

      const records: PopRecord[] = [];
      const reader = (async () => {
        for (;;) {
          const done = pushersDone;
          const depth = rnd.int(1, 3);
          const ackedAtSend = new Map(acked);
          const res = await answer(A.http.post(`/queue/${q}/pop?depth=${depth}`));
          records.push({ via: 'A', depth, status: res.status, items: itemsOf(res), body: res.body, ackedAtSend });
          if (res.status !== 200 || (done && itemsOf(res).length === 0)) return;
          if (itemsOf(res).length === 0) await sleep(2);
        }
      })();
      await Promise.all([pushers, reader]);

      for (const [i, rec] of records.entries()) problems.push(...checkPop(rec, `pop ${i}`));
      problems.push(...checkEmptyMeansEmpty(records, 'sequential'));
      const popped = records.flatMap((r) => r.items);
      problems.push(...checkStrictFifo(popped, new Map([0, 1, 2].map((p) => [`q0/w0/p${p}`, PER_PRIORITY]))));
      expect(problems, where).toEqual([]);
      expect(records.filter((r) => r.items.length > 0).length, where).toBeGreaterThanOrEqual(10);
    });
  });

  describe('two service instances on one database', () => {
    const QUEUES = 2;
    const WRITERS = 3;
    const PRIORITIES = 3;
    let queues: string[];

    beforeAll(() => {
      queues = range(QUEUES).map((i) => uniqueQueueId(`shared${i}`));
    });

    const via = (n: number): { name: string; svc: TestService } => (n % 2 === 0 ? { name: 'A', svc: A } : { name: 'B', svc: B });

    /**
     * One sequential client per (queue, writer, priority), all running at once. Writer 2 pushes
     * its three priorities together as one batch per sequence number. Consecutive pushes of a
     * stream go through A and B alternately.
     */
    function startWriters(
      phase: number,
      perStream: number,
      problems: string[],
      acked: Map<string, number>,
    ): { done: Promise<void>; expected: Map<string, number> } {
      const expected = new Map<string, number>();
      const clients: Promise<void>[] = [];
      for (let q = 0; q < QUEUES; q++) {
        for (let w = 0; w < WRITERS; w++) {
          const priorities = range(PRIORITIES);
          for (const p of priorities) expected.set(`q${q}/w${w}/p${p}`, perStream);
          const groups = w === 2 ? [priorities] : priorities.map((p) => [p]);
          for (const group of groups) {
            clients.push(
              (async () => {
                for (let s = 0; s < perStream; s++) {
                  const { name, svc } = via(s + w + group[0]);
                  const items = group.map((p) => ({ item: { q, w, p, s, ph: phase } satisfies Item, priority: p }));
                  const res =
                    items.length === 1
                      ? await answer(svc.http.post(`/queue/${queues[q]}/push`).send(items[0]))
                      : await answer(svc.http.post(`/queue/${queues[q]}/push/batch`).send({ items }));
                  if (res.status !== 200) {
                    problems.push(`push ${JSON.stringify(items)} via ${name}: ${res.status} ${JSON.stringify(res.body)}`);
                    if (res.status === 0) return; // stalled: stop this client
                    continue;
                  }
                  for (const p of group) acked.set(`q${q}/w${w}/p${p}`, (acked.get(`q${q}/w${w}/p${p}`) ?? 0) + 1);
                }
              })(),
            );
          }
        }
      }
      return { done: Promise.all(clients).then(() => undefined), expected };
    }

    async function drainBoth(q: number, label: string, records: PopRecord[]): Promise<void> {
      for (let round = 0; round < 200; round++) {
        const { name, svc } = via(round);
        const res = await answer(svc.http.post(`/queue/${queues[q]}/pop?depth=5`));
        records.push({ via: name, depth: 5, status: res.status, items: itemsOf(res), body: res.body });
        if (res.status !== 200) throw new Error(`${label}: drain pop via ${name}: ${res.status} ${JSON.stringify(res.body)}`);
        if (itemsOf(res).length === 0) return;
      }
      throw new Error(`${label}: queue ${queues[q]} not empty after 200 pops`);
    }

    it('sequential ping-pong: each instance sees every change the other made (cached actor is reloaded)', async () => {
      const q = uniqueQueueId('pingpong');
      const model = new Map<number, Item[]>();
      const modelPop = (depth: number): Item[] => {
        const out: Item[] = [];
        for (const p of [...model.keys()].sort((a, b) => a - b)) {
          const list = model.get(p)!;
          while (out.length < depth && list.length > 0) out.push(list.shift()!);
        }
        return out;
      };
      const modelCount = (): number => [...model.values()].reduce((n, l) => n + l.length, 0);
      let seq = 0;
      for (let round = 0; round < 30; round++) {
        const writer = via(round);
        const reader = via(round + 1);
        for (let k = 0; k < 3; k++) {
          const p = (round + k) % PRIORITIES;
          const item: Item = { q: 0, w: 0, p, s: seq++, ph: 3 };
          const res = await answer(writer.svc.http.post(`/queue/${q}/push`).send({ item, priority: p }));
          expect(res.status, `round ${round} push via ${writer.name}`).toBe(200);
          if (!model.has(p)) model.set(p, []);
          model.get(p)!.push(item);
        }
        const depth = round % 4 === 3 ? 4 : 2;
        const res = await answer(reader.svc.http.post(`/queue/${q}/pop?depth=${depth}`));
        expect(res.status).toBe(200);
        expect(res.body.items, `round ${round}: pop depth ${depth} via ${reader.name} after pushes via ${writer.name}`).toEqual(modelPop(depth));
        if (round % 5 === 4) {
          for (const { name, svc } of [via(0), via(1)]) {
            const info = await answer(svc.http.get(`/queue/${q}`));
            expect(info.status).toBe(200);
            expect(info.body.count, `round ${round}: GET via ${name}`).toBe(modelCount());
          }
        }
      }
      const rest = await drain<Item>(B.http, q);
      expect(rest).toEqual(modelPop(Infinity));
    });

    it('writers and 4 concurrent readers through both instances: nothing lost or duplicated, FIFO inside every pop', async () => {
      const PER_STREAM = 8;
      const problems: string[] = [];
      const acked = new Map<string, number>();
      let writersDone = false;
      const { done, expected } = startWriters(1, PER_STREAM, problems, acked);
      done.then(
        () => (writersDone = true),
        () => (writersDone = true),
      );
      const total = [...expected.values()].reduce((a, b) => a + b, 0);

      const records: PopRecord[] = [];
      let popped = 0;
      const deadline = Date.now() + 60_000;
      const reader = async (r: number): Promise<void> => {
        let empties = 0;
        for (let i = 0; Date.now() < deadline; i++) {
          if (popped >= total || (writersDone && empties >= 2 * QUEUES)) return;
          const q = rnd.int(0, QUEUES - 1);
          const { name, svc } = via(i + r);
          const depth = rnd.int(1, 5);
          const res = await answer(svc.http.post(`/queue/${queues[q]}/pop?depth=${depth}`));
          const items = itemsOf(res);
          records.push({ via: name, depth, status: res.status, items, body: res.body });
          if (res.status === 0) return; // stalled: stop this reader, checkPop reports it
          popped += items.length;
          if (items.length === 0) {
            empties += 1;
            await sleep(3);
          } else empties = 0;
        }
      };
      await Promise.all([done, ...range(4).map(reader)]);
      const concurrentPops = records.length;
      // After a stall the queues answer nothing more; the stall is the finding, skip the drain.
      if (!records.some((r) => r.status === 0) && !problems.some((p) => p.includes('no answer within'))) {
        for (let q = 0; q < QUEUES; q++) await drainBoth(q, 'phase 1', records).catch((e: Error) => problems.push(e.message));
      }

      for (const [i, rec] of records.entries()) problems.push(...checkPop(rec, `pop ${i} (${i < concurrentPops ? 'concurrent' : 'drain'})`));
      problems.push(
        ...checkExactlyOnce(
          records.flatMap((r) => r.items),
          expected,
        ),
      );
      expect(problems, where).toEqual([]);
      // Both instances really served pops that found items.
      for (const name of ['A', 'B']) expect(records.filter((r) => r.via === name && r.items.length > 0).length, `${name} ${where}`).toBeGreaterThan(5);
      for (const svc of [A, B]) for (const q of queues) expect((await answer(svc.http.get(`/queue/${q}`))).body.count).toBe(0);
    });

    it('writers through both instances, one reader alternating A and B: strict FIFO per writer and priority', async () => {
      // Leftovers of a failed previous test would be reported there, not here.
      for (let q = 0; q < QUEUES; q++) await drainBoth(q, 'pre-drain', []);
      const PER_STREAM = 6;
      const problems: string[] = [];
      const acked = new Map<string, number>();
      let writersDone = false;
      const { done, expected } = startWriters(2, PER_STREAM, problems, acked);
      done.then(
        () => (writersDone = true),
        () => (writersDone = true),
      );

      const records: PopRecord[] = [];
      const reader = (async () => {
        let emptyRound = 0;
        for (let i = 0; i < 2000; i++) {
          const finished = writersDone;
          const q = i % QUEUES;
          const { name, svc } = via(Math.floor(i / QUEUES) + q);
          const depth = rnd.int(1, 5);
          // What had been acknowledged on this queue when the pop was sent.
          const ackedAtSend = new Map([...acked].filter(([stream]) => stream.startsWith(`q${q}/`)));
          const res = await answer(svc.http.post(`/queue/${queues[q]}/pop?depth=${depth}`));
          records.push({ via: name, depth, status: res.status, items: itemsOf(res), body: res.body, ackedAtSend });
          if (res.status !== 200) return;
          if (itemsOf(res).length === 0) {
            emptyRound += 1;
            if (finished && emptyRound >= QUEUES) return;
            await sleep(2);
          } else emptyRound = 0;
        }
      })();
      await Promise.all([done, reader]);

      for (const [i, rec] of records.entries()) problems.push(...checkPop(rec, `pop ${i}`));
      problems.push(...checkEmptyMeansEmpty(records, 'alternating'));
      problems.push(
        ...checkStrictFifo(
          records.flatMap((r) => r.items),
          expected,
        ),
      );
      expect(problems, where).toEqual([]);
      for (const name of ['A', 'B']) expect(records.filter((r) => r.via === name && r.items.length > 0).length, `${name} ${where}`).toBeGreaterThan(5);
    });
  });

  describe('bounded waiting line', () => {
    let C: TestService;
    beforeAll(async () => {
      C = await startService({ env: { MAX_PENDING_PER_QUEUE: '2' } });
    });
    afterAll(async () => {
      await within(C?.close() ?? Promise.resolve(), 15_000, undefined);
      if (C) removeDataDir(C.dataDir);
    });

    it('30 concurrent batch pushes with MAX_PENDING_PER_QUEUE=2: some 429 QUEUE_BUSY with Retry-After, every 200 really queued', async () => {
      const q = uniqueQueueId('busy');
      const BATCH = 100;
      // Slow turns (50 ms per write), so that the 30 requests pile up behind the queue's turn
      // however fast the machine is; the line is what this test is about.
      const segments = C.app.get(QueueStateRepository);
      const write = segments.writeTurn.bind(segments);
      const slow = vi.spyOn(segments, 'writeTurn').mockImplementation(async (...args) => {
        await sleep(50);
        return write(...args);
      });
      const responses = await Promise.all(
        range(30).map(async (b) => {
          const items = range(BATCH).map((i) => ({ item: { b, i } }));
          return { b, res: await answer(C.http.post(`/queue/${q}/push/batch`).send({ items })) };
        }),
      );
      const ok = responses.filter((r) => r.res.status === 200);
      const busy = responses.filter((r) => r.res.status === 429);
      const other = responses.filter((r) => r.res.status !== 200 && r.res.status !== 429);
      expect(other.map((r) => `${r.res.status} ${JSON.stringify(r.res.body)}`)).toEqual([]);
      expect(busy.length, 'some pushes must be turned away').toBeGreaterThan(0);
      expect(ok.length, 'some pushes must get through').toBeGreaterThan(0);
      for (const { res } of busy) {
        expect(res.body).toMatchObject({ statusCode: 429, error_code: 'QUEUE_BUSY' });
        expect(typeof res.body.message).toBe('string');
        expect(res.headers['retry-after'], 'Retry-After header').toMatch(/^\d+$/);
      }
      for (const { res } of ok) expect(res.body).toMatchObject({ success: true, count: BATCH });
      slow.mockRestore();

      const info = await answer(C.http.get(`/queue/${q}`));
      expect(info.status).toBe(200);
      expect(info.body.count).toBe(ok.length * BATCH);
      // Exactly the acknowledged batches are queued, each whole and in order; rejected ones left no trace.
      const popped = await drain<{ b: number; i: number }>(C.http, q);
      const batches = groupBy(popped, (x) => String(x.b));
      expect([...batches.keys()].map(Number).sort((a, b) => a - b)).toEqual(ok.map((r) => r.b).sort((a, b) => a - b));
      for (const items of batches.values()) expect(items.map((x) => x.i)).toEqual(range(BATCH));

      // The line drains: the queue takes pushes again.
      const again = await answer(C.http.post(`/queue/${q}/push`).send({ item: { again: true } }));
      expect(again.status).toBe(200);
    });
  });
});
