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
  return /Connection terminated|timeout exceeded when trying to connect|Cannot use a pool after calling end|Client has encountered a connection error|Client was closed|is not queryable/i.test(error.message);
}
