import { Injectable } from '@nestjs/common';
import { QueueListingRepository } from '../../storage/queue-listing.repository.js';

/** Candidates read from the ready set at a time, per prefix. */
export const ROTATION_BATCH = 16;
/** Prefixes whose place in the round this process remembers; past it the least recently used is forgotten (it starts again from the first queue). */
export const MAX_ROTATIONS = 10_000;

/** A candidate queue of a fair pop, with the number of the read that found it (reads are numbered in this process in the order they are made). */
export interface Candidate {
  readonly queueId: string;
  readonly read: number;
}

/** Where a prefix's round stands in this process. */
interface Rotation {
  /** Candidates read and not handed out yet, in round order. */
  readonly pending: Candidate[];
  /** The last queue id read from the ready set: the next read starts after it. Null: from the first one. */
  after: string | null;
  /** The read under way, shared by the callers that found `pending` empty; resolves to the number of ids it found. */
  reading?: Promise<number>;
}

/**
 * The round robin of fair pops, per prefix, in this process: {@link next} hands out the ready
 * queues under the prefix (items to hand out, not paused; see `QueueListingRepository.readyQueues`)
 * one at a time, in queue id order, each after the one handed out before, wrapping around.
 * Candidates are read {@link ROTATION_BATCH} at a time, in one statement shared by the callers
 * that run out meanwhile, so concurrent fair pops on a prefix take different queues and most
 * pops read nothing.
 *
 * Invariant: within this process, the ids handed out for a prefix follow the ring of ready
 * queues in id order without going back: a queue that stays ready is handed out once per turn of
 * the ring (a queue that becomes ready behind the batch read last waits for the next turn). A
 * candidate may have been emptied, paused, limited or locked since it was read: the caller
 * skips it (the set itself is never stale: the database keeps it with every write).
 */
@Injectable()
export class PrefixRotations {
  private readonly rotations = new Map<string, Rotation>();
  private lastRead = 0;

  constructor(private readonly listing: QueueListingRepository) {}

  /**
   * The number of the last read made so far: a candidate whose `read` is greater was read after
   * this call, so it reflects the ready set as it is since then. A fair pop has gone all the way
   * round once such candidates repeat (older ones may miss queues that became ready since).
   */
  get reads(): number {
    return this.lastRead;
  }

  /** The next candidate queue for a fair pop on `prefix`; undefined when no queue under it is ready. */
  async next(prefix: string): Promise<Candidate | undefined> {
    const rotation = this.rotation(prefix);
    // A read that others emptied before this caller's turn came is followed by one more.
    for (let reads = 0; reads < 3; reads++) {
      const candidate = rotation.pending.shift();
      if (candidate !== undefined) return candidate;
      rotation.reading ??= this.read(prefix, rotation).finally(() => (rotation.reading = undefined));
      if ((await rotation.reading) === 0) return undefined;
    }
    return rotation.pending.shift();
  }

  /** Prefixes remembered now. */
  get size(): number {
    return this.rotations.size;
  }

  private rotation(prefix: string): Rotation {
    let rotation = this.rotations.get(prefix);
    if (rotation) {
      // Most recently used last: the first entry is the one to forget.
      this.rotations.delete(prefix);
    } else {
      rotation = { pending: [], after: null };
      if (this.rotations.size >= MAX_ROTATIONS) this.rotations.delete(this.rotations.keys().next().value!);
    }
    this.rotations.set(prefix, rotation);
    return rotation;
  }

  private async read(prefix: string, rotation: Rotation): Promise<number> {
    const read = ++this.lastRead;
    const ids = await this.listing.readyQueues(prefix, rotation.after, ROTATION_BATCH);
    if (ids.length > 0) rotation.after = ids.at(-1)!;
    for (const queueId of ids) rotation.pending.push({ queueId, read });
    return ids.length;
  }
}
