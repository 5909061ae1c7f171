/** What one request got from its client's bucket. */
export interface BucketAnswer {
  /** Whether a token was taken: the request may go on. */
  readonly allowed: boolean;
  /** Whole tokens left: requests the client may still make at once. */
  readonly remaining: number;
  /** Seconds, rounded up, until the bucket is full again (`remaining` back at the burst); 0 when it is. */
  readonly resetSeconds: number;
  /** Seconds, rounded up and at least 1, until the next token: when a refused request may be retried. */
  readonly retryAfterSeconds: number;
}

export interface TokenBucketOptions {
  /** Tokens added per second, to each bucket (fractions allowed). */
  readonly ratePerSecond: number;
  /** Size of a bucket, in whole tokens; a new client starts with a full bucket. */
  readonly burst: number;
  /** Most buckets kept at once; past it the least recently used one goes (see {@link TokenBuckets}). */
  readonly maxBuckets?: number;
  /** Monotonic milliseconds; a fake clock in tests. */
  readonly now?: () => number;
}

interface Bucket {
  /** Tokens at `at` (fractional: refill is continuous). */
  tokens: number;
  /** When `tokens` was last brought up to date, on the `now` clock. */
  at: number;
}

/** Below this, a fraction of a token is floating-point noise (rates have at most 3 decimals). */
const EPSILON = 1e-9;

/** Enough for every client of a busy service at about 150 bytes each (~15 MB at the cap). */
export const DEFAULT_MAX_BUCKETS = 100_000;

/**
 * Token buckets by client key. Each holds up to `burst` tokens and gains `ratePerSecond`
 * continuously; a request takes one token, or is refused when less than one is left. So a
 * client may send `burst` requests at once, and `ratePerSecond` on average.
 *
 * Memory stays bounded however many distinct clients come. The buckets live in a `Map` kept
 * in order of last use (a take moves its bucket to the end), so the least recently used comes
 * first. Invariant: along the map, the time of last use never decreases. Hence:
 * - a bucket untouched for `burst / ratePerSecond` seconds has refilled to full, and a full
 *   bucket is exactly what a new client gets, so dropping it changes no answer. Whenever a new
 *   client arrives, such buckets are dropped from the front until the first one still in use;
 *   each bucket is dropped once, so this costs O(1) per request on average;
 * - past `maxBuckets` the least recently used bucket is dropped even if it is not full (its
 *   client is forgiven what it owed). That happens only with more than `maxBuckets` clients
 *   active within `burst / ratePerSecond` seconds.
 *
 * Not shared between processes: each replica limits on its own.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();
  private readonly ratePerMs: number;
  private readonly burst: number;
  private readonly ratePerSecond: number;
  /** Milliseconds an empty bucket takes to refill: after that long unused, any bucket is full. */
  private readonly refillMs: number;
  private readonly maxBuckets: number;
  private readonly now: () => number;

  constructor(options: TokenBucketOptions) {
    if (!(options.ratePerSecond > 0) || !(options.burst >= 1)) throw new RangeError('a token bucket needs a positive rate and a burst of at least 1');
    this.ratePerSecond = options.ratePerSecond;
    this.ratePerMs = options.ratePerSecond / 1000;
    this.burst = options.burst;
    this.refillMs = (options.burst / options.ratePerSecond) * 1000;
    this.maxBuckets = Math.max(1, options.maxBuckets ?? DEFAULT_MAX_BUCKETS);
    this.now = options.now ?? (() => performance.now());
  }

  /** Buckets held in memory. */
  get size(): number {
    return this.buckets.size;
  }

  /** Takes a token from `key`'s bucket if there is one, and tells what is left. */
  take(key: string): BucketAnswer {
    const now = this.now();
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      this.makeRoom(now);
      bucket = { tokens: this.burst, at: now };
    } else {
      // Re-inserted below, at the end: the map stays in order of last use.
      this.buckets.delete(key);
      bucket.tokens = Math.min(this.burst, bucket.tokens + Math.max(0, now - bucket.at) * this.ratePerMs);
      bucket.at = Math.max(bucket.at, now);
    }
    this.buckets.set(key, bucket);
    const allowed = bucket.tokens >= 1 - EPSILON;
    if (allowed) bucket.tokens = Math.max(0, bucket.tokens - 1);
    const missing = this.burst - bucket.tokens;
    return {
      allowed,
      remaining: Math.floor(bucket.tokens + EPSILON),
      resetSeconds: missing <= EPSILON ? 0 : Math.ceil(missing / this.ratePerSecond - EPSILON),
      retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / this.ratePerSecond - EPSILON)),
    };
  }

  /** Drops the buckets that have refilled to full, then the least recently used ones past the cap, before a new one is added. */
  private makeRoom(now: number): void {
    for (const [key, bucket] of this.buckets) {
      if (now - bucket.at < this.refillMs && this.buckets.size < this.maxBuckets) break;
      this.buckets.delete(key);
    }
  }
}
