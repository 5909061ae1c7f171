/**
 * What the console may do with the key it holds, and where it keeps that key: pure functions,
 * no React and no `window`, so that they are unit-tested without a browser
 * (test/browser/console-logic.test.ts).
 */

/** The scopes of an API key (README "Security"); `admin` may do everything. */
export type Scope = 'produce' | 'consume' | 'read' | 'admin';

/** The console's controls, grouped by the scope each needs. */
export type Action = 'read' | 'metrics' | 'push' | 'pop' | 'lock' | 'settings' | 'delete' | 'redrive';

/** The scope each action needs (besides `admin`), as the service checks it. */
export const ACTION_SCOPE: Readonly<Record<Action, Scope>> = {
  read: 'read',
  metrics: 'read',
  push: 'produce',
  pop: 'consume',
  lock: 'consume',
  settings: 'admin',
  delete: 'admin',
  redrive: 'admin',
};

const ACTION_TEXT: Readonly<Record<Action, string>> = {
  read: 'Listing and reading queues',
  metrics: 'The service numbers (/metrics)',
  push: 'Pushing',
  pop: 'Popping',
  lock: 'Acknowledging, extending or releasing a lock',
  settings: 'Changing a queue’s settings',
  delete: 'Deleting a queue',
  redrive: 'Redriving a queue’s items',
};

/** Who the console is, from `GET /whoami`: a key's name and scopes, or `null` when the service has no keys. */
export interface Identity {
  name: string;
  scopes: readonly string[];
}

export function allows(scopes: readonly string[], action: Action): boolean {
  return scopes.includes('admin') || scopes.includes(ACTION_SCOPE[action]);
}

/** Whether a control works, and if not, a sentence saying why (a tooltip or a note). */
export type Permission = { allowed: true } | { allowed: false; reason: string };
export type Permissions = Readonly<Record<Action, Permission>>;

const ACTIONS = Object.keys(ACTION_SCOPE) as Action[];

/**
 * What `identity` may do. `null` (no keys configured, or not known yet because the service
 * did not answer) allows everything: the service still refuses what it refuses, and the
 * console shows its answer.
 */
export function permissions(identity: Identity | null): Permissions {
  const entries = ACTIONS.map((action): [Action, Permission] => {
    if (identity === null || allows(identity.scopes, action)) return [action, { allowed: true }];
    const scope = ACTION_SCOPE[action];
    const needs = scope === 'admin' ? 'the admin scope' : `the ${scope} (or admin) scope`;
    return [action, { allowed: false, reason: `${ACTION_TEXT[action]} needs ${needs}; the key “${identity.name}” has ${scopeList(identity.scopes)}.` }];
  });
  return Object.fromEntries(entries) as Record<Action, Permission>;
}

function scopeList(scopes: readonly string[]): string {
  return scopes.length === 0 ? 'no scope' : scopes.join(', ');
}

/** The header's words for who the console is: "ops · admin", "viewer · read, produce", "open (no keys)". */
export function identityLabel(identity: Identity | null): string {
  return identity === null ? 'open (no keys)' : `${identity.name} · ${scopeList(identity.scopes)}`;
}

/** The parts of `Storage` the console uses (sessionStorage in the page, a fake in tests). */
export type KeyStorage = Pick<Storage, 'getItem' | 'setItem' | 'removeItem'>;

/** Where the key lives: the tab's sessionStorage only (never localStorage, never the URL). */
export const KEY_STORAGE_NAME = 'pushpop.admin.apiKey';

/** The key kept for this browser session, if any. Storage that throws (disabled) holds none. */
export function loadKey(storage: KeyStorage | undefined): string | undefined {
  try {
    const key = storage?.getItem(KEY_STORAGE_NAME);
    return key ? key : undefined;
  } catch {
    return undefined;
  }
}

/** Keeps the key for the session; false when storage refused it (the key then lasts until a reload). */
export function saveKey(storage: KeyStorage | undefined, key: string): boolean {
  try {
    if (!storage) return false;
    storage.setItem(KEY_STORAGE_NAME, key);
    return true;
  } catch {
    return false;
  }
}

export function forgetKey(storage: KeyStorage | undefined): void {
  try {
    storage?.removeItem(KEY_STORAGE_NAME);
  } catch {
    // nothing kept
  }
}

/**
 * Checks what was typed before it goes into a header: surrounding blanks are dropped; blanks
 * inside or characters outside printable ASCII could not be sent (`fetch` refuses them), so
 * they are refused here. Whether the key is known is the service's to say.
 */
export function checkKeyInput(text: string): { key: string } | { problem: string } {
  const key = text.trim();
  if (key === '') return { problem: 'Enter an API key.' };
  if (!/^[\x21-\x7e]+$/.test(key)) return { problem: 'An API key has no spaces and only the characters A–Z a–z 0–9 . _ ~ + / = -.' };
  return { key };
}

/** An error answer as far as the session cares: its HTTP status, `error_code` and `message`. */
export interface Problem {
  status: number;
  code: string;
  message: string;
}

/**
 * Where the console stands with the service:
 * - `checking`: asking `GET /whoami` for the first time;
 * - `open`: the service has no keys, everything is allowed (the console as it was before keys);
 * - `signed-in`: the key held is known, with its name and scopes;
 * - `unknown`: `/whoami` did not answer (service down): behave as `open` and ask again;
 * - `key-needed`: the service answered 401; `problem` says why when a key was sent and refused.
 */
export type Session =
  | { kind: 'checking' }
  | { kind: 'open' }
  | { kind: 'signed-in'; identity: Identity }
  | { kind: 'unknown'; attempt: number }
  | { kind: 'key-needed'; problem?: Problem };

/** The session `GET /whoami` describes. */
export function sessionFromWhoAmI(who: { authentication: boolean; name: string | null; scopes: readonly string[] }): Session {
  if (!who.authentication) return { kind: 'open' };
  return { kind: 'signed-in', identity: { name: who.name ?? '', scopes: [...who.scopes] } };
}

/**
 * The session after an error answer (from `/whoami` or any other call). A 401 asks for a key,
 * saying why only when one was sent (a first visit just asks); `/whoami` failing otherwise
 * (network, 5xx) leaves the console usable and asks again later; other errors (403, 404, ...)
 * belong to the action that got them and change nothing here.
 */
export function sessionAfterFailure(session: Session, problem: Problem, keySent: boolean): Session {
  if (problem.status === 401) return keySent ? { kind: 'key-needed', problem } : { kind: 'key-needed' };
  if (session.kind === 'checking') return { kind: 'unknown', attempt: 1 };
  if (session.kind === 'unknown') return { kind: 'unknown', attempt: session.attempt + 1 };
  return session;
}

/** Who the console acts as, for {@link permissions} and the header: `null` while everything is allowed. */
export function sessionIdentity(session: Session): Identity | null {
  return session.kind === 'signed-in' ? session.identity : null;
}
