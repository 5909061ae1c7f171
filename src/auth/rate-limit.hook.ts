import type { FastifyInstance, FastifyRequest, onRequestHookHandler } from 'fastify';
import type {} from '../auth/principal.js';
import { RateLimitedError } from '../common/errors.js';
import { defaultRateLimitBurst, type Environment } from '../config/environment.js';
import { TokenBuckets } from './token-buckets.js';

/**
 * Rate limiting (CONTRACT.md "Rate limiting"): with `RATE_LIMIT_PER_SECOND` above 0, every
 * request except `/health*` takes a token from its client's bucket ({@link TokenBuckets}), by
 * {@link rateLimitKey}. Each answer says where the client stands: `RateLimit-Limit` (the burst),
 * `RateLimit-Remaining` (whole tokens left) and `RateLimit-Reset` (seconds until the bucket is
 * full again). With no token left the request is refused before anything else is done (no body
 * read, no queue touched): 429 `RATE_LIMITED` with `Retry-After`, the seconds until the next
 * token. With the limit off nothing is added at all.
 *
 * Ordering: Fastify runs the `onRequest` hooks of a context in the order they were added.
 * `configureApp` adds this one after the hook that identifies the API key (it sets
 * `request.principal`), so that the bucket is the key's rather than the client address's, and
 * before the one that refuses with 401/403, so that refusals are limited too.
 *
 * Hand-written rather than `@fastify/rate-limit`, which was tried: it counts in fixed windows
 * (a token bucket would be a custom store), and besides
 * - it limits through route hooks added by an `onRoute` hook, so it must finish loading before
 *   Nest adds its routes, which Nest does not wait for (registered here it limited nothing), and
 *   requests that match no route (404) would be neither limited nor told their RateLimit-*;
 * - it derives `Retry-After` and `RateLimit-Reset` from one number, while a bucket has two:
 *   the next token and a full bucket;
 * - its hook is async, a few promises per request; this one is one synchronous callback
 *   (as the metrics hooks are, for the same reason).
 */
export function registerRateLimit(fastify: FastifyInstance, env: Environment, options: { now?: () => number } = {}): void {
  const hook = rateLimitHook(env, options);
  if (hook) fastify.addHook('onRequest', hook);
}

/** The rate limit's `onRequest` hook, or undefined while the limit is off. */
export function rateLimitHook(env: Environment, options: { now?: () => number } = {}): onRequestHookHandler | undefined {
  const rate = env.RATE_LIMIT_PER_SECOND;
  if (!(rate > 0)) return undefined;
  const burst = env.RATE_LIMIT_BURST ?? defaultRateLimitBurst(rate);
  const buckets = new TokenBuckets({ ratePerSecond: rate, burst, now: options.now });
  return (request, reply, done) => {
    if (isUnlimited(request.routeOptions.url)) return done();
    const answer = buckets.take(rateLimitKey(request));
    reply.header('RateLimit-Limit', burst).header('RateLimit-Remaining', answer.remaining).header('RateLimit-Reset', answer.resetSeconds);
    // The error handler (the global filter) keeps the headers already set and adds Retry-After.
    done(answer.allowed ? undefined : new RateLimitedError(answer.retryAfterSeconds, rate, burst));
  };
}

/** `/health` and `/health/ready` answer load balancers and orchestrators, however often they ask. */
function isUnlimited(routeUrl: string | undefined): boolean {
  return routeUrl !== undefined && (routeUrl === '/health' || routeUrl.startsWith('/health/'));
}

/**
 * Whose bucket a request takes from: the API key's name when the request carried a known key
 * (`key:billing`), else the client's address (`ip:203.0.113.7`, see {@link clientNetwork}).
 * The address is the TCP peer's: behind a reverse proxy, without API keys, every client shares the proxy's bucket.
 */
export function rateLimitKey(request: Pick<FastifyRequest, 'principal' | 'ip'>): string {
  return request.principal ? `key:${request.principal.name}` : `ip:${clientNetwork(request.ip)}`;
}

/**
 * An IPv4 address as it is (also when written IPv4-mapped, `::ffff:192.0.2.1`), an IPv6 address
 * as its /64 network (`2001:db8:0:1::/64`): one host usually holds a whole /64, and could take
 * a fresh bucket with every address of it.
 */
export function clientNetwork(ip: string): string {
  if (!ip.includes(':')) return ip;
  // What Node reports for an IPv4 client of a dual-stack listener (HOST=::): no parsing needed.
  if (ip.startsWith('::ffff:') && ip.lastIndexOf(':') === 6 && ip.includes('.')) return ip.slice(7);
  const address = ip.split('%')[0].toLowerCase();
  const v4 = /\d{1,3}(?:\.\d{1,3}){3}$/.exec(address)?.[0];
  const groups = ipv6Groups(v4 ? `${address.slice(0, -v4.length)}0:0` : address);
  if (v4 && groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) return v4;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, `::` expanded. */
function ipv6Groups(address: string): number[] {
  const [head, tail] = address.split('::');
  const front = head ? head.split(':') : [];
  const back = tail ? tail.split(':') : [];
  const zeros = tail === undefined ? 0 : Math.max(0, 8 - front.length - back.length);
  return [...front, ...Array<string>(zeros).fill('0'), ...back].map((g) => parseInt(g, 16));
}
