import { createContext, useCallback, useContext, useEffect, useMemo, useState } from 'react';
import { createPushpopClient, type PushpopClient } from '@pushpop/api-client';
import {
  forgetKey,
  loadKey,
  permissions,
  saveKey,
  sessionAfterFailure,
  sessionFromWhoAmI,
  sessionIdentity,
  type Identity,
  type KeyStorage,
  type Permissions,
  type Session,
} from './access';
import { call, isAbort, toApiError } from './api';

/** How long to wait before asking `/whoami` again after it did not answer. */
const WHOAMI_RETRY_MS = 5000;

/** The tab's sessionStorage, or none where the browser refuses it. */
function sessionStore(): KeyStorage | undefined {
  try {
    return window.sessionStorage;
  } catch {
    return undefined;
  }
}

/**
 * A client for the service that served the page, sending `key` with every call. A 401 answer
 * (the service has keys and this one is missing or unknown) is reported to `onUnauthorized`
 * with the API's error body, whichever call got it.
 */
function buildClient(key: string | undefined, onUnauthorized: (problem: { status: number; code: string; message: string }) => void): PushpopClient {
  const client = createPushpopClient(window.location.origin, key === undefined ? {} : { apiKey: key });
  client.use({
    onResponse: async ({ response }) => {
      if (response.status !== 401) return undefined;
      let body: { error_code?: unknown; message?: unknown } = {};
      try {
        body = (await response.clone().json()) as typeof body;
      } catch {
        // not JSON: the status says enough
      }
      onUnauthorized({
        status: 401,
        code: typeof body.error_code === 'string' ? body.error_code : 'UNAUTHORIZED',
        message: typeof body.message === 'string' ? body.message : 'The service asks for an API key',
      });
      return undefined;
    },
  });
  return client;
}

interface State {
  key: string | undefined;
  /** Bumped whenever the key changes, so the console below remounts and reloads with it. */
  generation: number;
  session: Session;
}

export interface ConsoleSession {
  session: Session;
  api: PushpopClient;
  /** Changes with the key: the console's panels are keyed on it. */
  generation: number;
  identity: Identity | null;
  permissions: Permissions;
  /** Tries a key with `/whoami`; on success keeps it for the tab's session and uses it. Throws the API's error otherwise. */
  signIn: (key: string) => Promise<void>;
  /** Drops the key from the session (sessionStorage too) and asks for one again. */
  forget: () => void;
}

/**
 * The key the console sends, and what the service says it may do. The key lives in the tab's
 * sessionStorage only: a reload keeps it, closing the tab forgets it; it never goes into
 * localStorage or the URL.
 *
 * Ordering: every client reports 401s with the key it was built with, and a report counts only
 * while that key is still the one in use, so a late 401 of a request sent with an old (or no)
 * key cannot bring the prompt back after a new key was accepted.
 */
export function useSession(): ConsoleSession {
  const [state, setState] = useState<State>(() => ({ key: loadKey(sessionStore()), generation: 0, session: { kind: 'checking' } }));
  const { key, session } = state;

  const api = useMemo(
    () => buildClient(key, (problem) => setState((s) => (s.key === key ? { ...s, session: sessionAfterFailure(s.session, problem, key !== undefined) } : s))),
    [key],
  );

  // Who am I: at first, and again while the service does not answer.
  useEffect(() => {
    if (session.kind !== 'checking' && session.kind !== 'unknown') return;
    const controller = new AbortController();
    const ask = async () => {
      try {
        const who = await call(api.GET('/whoami', { signal: controller.signal }));
        setState((s) => (s.key === key ? { ...s, session: sessionFromWhoAmI(who) } : s));
      } catch (error) {
        if (isAbort(error)) return;
        const problem = toApiError(error);
        setState((s) => (s.key === key ? { ...s, session: sessionAfterFailure(s.session, problem, key !== undefined) } : s));
      }
    };
    const timer = setTimeout(() => void ask(), session.kind === 'unknown' ? WHOAMI_RETRY_MS : 0);
    return () => {
      clearTimeout(timer);
      controller.abort();
    };
  }, [api, key, session]);

  const signIn = useCallback(async (candidate: string) => {
    const who = await call(createPushpopClient(window.location.origin, { apiKey: candidate }).GET('/whoami'));
    const next = sessionFromWhoAmI(who);
    // With keys off a key means nothing: keep none.
    const kept = next.kind === 'signed-in' ? candidate : undefined;
    if (kept === undefined) forgetKey(sessionStore());
    else saveKey(sessionStore(), kept);
    setState((s) => ({ key: kept, generation: s.generation + 1, session: next }));
  }, []);

  const forget = useCallback(() => {
    forgetKey(sessionStore());
    setState((s) => ({ key: undefined, generation: s.generation + 1, session: { kind: 'key-needed' } }));
  }, []);

  const identity = sessionIdentity(session);
  const allowed = useMemo(() => permissions(identity), [identity]);
  return { session, api, generation: state.generation, identity, permissions: allowed, signIn, forget };
}

const ApiContext = createContext<PushpopClient | null>(null);
const PermissionsContext = createContext<Permissions>(permissions(null));

export const ApiProvider = ApiContext.Provider;
export const PermissionsProvider = PermissionsContext.Provider;

/** The client of the current session (with its key). */
export function useApi(): PushpopClient {
  const api = useContext(ApiContext);
  if (!api) throw new Error('useApi outside ApiProvider');
  return api;
}

/** What the current key may do: each control asks before it offers itself. */
export function usePermissions(): Permissions {
  return useContext(PermissionsContext);
}
