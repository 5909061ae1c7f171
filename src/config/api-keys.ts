import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { EnvironmentError } from './environment.js';

/** What an API key may do (CONTRACT.md "Authentication and authorisation"); `admin` may do everything. */
export const SCOPES = ['produce', 'consume', 'read', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

/** One configured key. `key` is the secret: it is compared, never logged or returned. */
export interface ApiKey {
  readonly name: string;
  readonly key: string;
  readonly scopes: readonly Scope[];
}

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const KEY = /^[A-Za-z0-9._~+/=-]{16,256}$/;

/**
 * Parses `<name>:<key>:<scope>[+<scope>…]` entries. A problem names the entry's position and
 * what is wrong with it, never any of its text: a malformed entry may hold the key anywhere
 * (fields swapped, a colon missing), and the message goes to the boot log.
 * @param where - how a problem names an entry, e.g. `(n) => \`API_KEYS entry ${n}\``
 */
export function parseApiKeys(entries: readonly { text: string; position: number }[], where: (position: number) => string): ApiKey[] {
  const problems: string[] = [];
  const keys: ApiKey[] = [];
  const names = new Map<string, number>();
  const secrets = new Map<string, number>();
  for (const { text, position } of entries) {
    const at = where(position);
    const parts = text.split(':');
    if (parts.length !== 3) {
      problems.push(`${at}: must be <name>:<key>:<scope>[+<scope>…] (three fields separated by colons)`);
      continue;
    }
    const [name, key, scopeList] = parts.map((p) => p.trim());
    const scopes = scopeList.split('+');
    const bad: string[] = [];
    if (!NAME.test(name)) bad.push('the name must be 1-64 characters of A-Z a-z 0-9 _ -');
    if (!KEY.test(key)) bad.push('the key must be 16-256 characters of A-Z a-z 0-9 . _ ~ + / = -');
    if (!scopes.every((s) => (SCOPES as readonly string[]).includes(s))) bad.push(`the scopes must be ${SCOPES.join(', ')}, joined by +`);
    if (bad.length > 0) {
      problems.push(`${at}: ${bad.join('; ')}`);
      continue;
    }
    if (names.has(name)) problems.push(`${at}: the name is already used by ${where(names.get(name)!)}`);
    if (secrets.has(key)) problems.push(`${at}: the key is already used by ${where(secrets.get(key)!)}`);
    names.set(name, position);
    secrets.set(key, position);
    keys.push({ name, key, scopes: [...new Set(scopes as Scope[])] });
  }
  if (problems.length > 0) throw new EnvironmentError(problems);
  return keys;
}

/**
 * The keys of `API_KEYS` (comma-separated entries) or `API_KEYS_FILE` (one entry per line, blank
 * lines and `#` comments ignored). Neither set: no keys, everything is open.
 */
export function loadApiKeys(
  env: { API_KEYS?: string; API_KEYS_FILE?: string },
  read: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): ApiKey[] {
  if (env.API_KEYS !== undefined && env.API_KEYS_FILE !== undefined) throw new EnvironmentError(['API_KEYS and API_KEYS_FILE are both set: set one of them']);
  if (env.API_KEYS !== undefined) {
    const entries = env.API_KEYS.split(',').map((text, i) => ({ text, position: i + 1 }));
    return parseApiKeys(entries, (n) => `API_KEYS entry ${n}`);
  }
  if (env.API_KEYS_FILE === undefined) return [];
  let text: string;
  try {
    text = read(env.API_KEYS_FILE);
  } catch (error) {
    throw new EnvironmentError([`API_KEYS_FILE=${JSON.stringify(env.API_KEYS_FILE)}: cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`]);
  }
  const entries = text
    .split(/\r?\n/)
    .map((line, i) => ({ text: line.trim(), position: i + 1 }))
    .filter((e) => e.text !== '' && !e.text.startsWith('#'));
  if (entries.length === 0) throw new EnvironmentError([`API_KEYS_FILE=${JSON.stringify(env.API_KEYS_FILE)}: holds no keys`]);
  return parseApiKeys(entries, (n) => `API_KEYS_FILE line ${n}`);
}

/** `localhost`, 127.0.0.0/8, ::1 (also as an IPv4-mapped address). */
export function isLoopback(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) !== 6) return false;
  // The URL parser writes an IPv6 address in its shortest form (::ffff:127.0.0.1 as [::ffff:7f00:1]).
  const canonical = new URL(`http://[${h}]/`).hostname;
  return canonical === '[::1]' || canonical.startsWith('[::ffff:7f');
}

/**
 * Refuses to serve other machines without keys: with no keys configured and `HOST` not a
 * loopback address, the boot stops unless `ALLOW_UNAUTHENTICATED=true`.
 */
export function checkExposure(env: { HOST: string; ALLOW_UNAUTHENTICATED: boolean }, keys: readonly ApiKey[]): void {
  if (keys.length > 0 || env.ALLOW_UNAUTHENTICATED || isLoopback(env.HOST)) return;
  throw new EnvironmentError([
    `HOST=${JSON.stringify(env.HOST)} serves other machines, and no API keys are configured: set API_KEYS or API_KEYS_FILE (see README "Security"), or ALLOW_UNAUTHENTICATED=true to serve every queue to anyone who can reach the port`,
  ]);
}
