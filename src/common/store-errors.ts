/**
 * Whether an error of the PostgreSQL driver means "the database cannot be reached right now"
 * (answered 503 STORE_UNAVAILABLE, retried by the client) rather than a fault of the statement
 * (a bug: 500). Connection-level SQLSTATE classes (08 connection exception, 57P operator
 * intervention such as an administrator or crash shutdown or a server still starting, 53
 * insufficient resources such as too many connections, 58 system errors), a system error of
 * the socket (`ECONNREFUSED`, `ENOENT` for a unix socket that is gone, `ECONNRESET`, `EPIPE`,
 * `ETIMEDOUT`, ...), or the driver's own connection messages.
 */
export function isConnectionFailure(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const { code, syscall } = error as { code?: unknown; syscall?: unknown };
  // A system error of the socket (it carries the failed call); checked first: `EPIPE` also looks like an SQLSTATE.
  if (typeof syscall === 'string' || (typeof code === 'string' && /^E[A-Z]+$/.test(code) && !/^[0-9A-Z]{5}$/.test(code))) return true;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return /^(08|57P|53|58)/.test(code);
  return /Connection terminated|timeout exceeded when trying to connect|Cannot use a pool after calling end|Client has encountered a connection error|Client was closed|is not queryable/i.test(
    error.message,
  );
}

/**
 * Whether an error of the PostgreSQL driver means "this transaction lost a race; run it again":
 * a deadlock (40P01) or a serialization failure (40001). A turn that dead-letters locks two
 * queue rows; it takes them in a fixed order, but a turn already holding its queue's row lock
 * (the fallback after optimistic misses) may meet another such turn the other way round, and
 * PostgreSQL then aborts one of them.
 */
export function isTransientConflict(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}
