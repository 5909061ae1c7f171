import { useCallback, useEffect, useRef, useState } from 'react';
import { isAbort, toApiError, type ApiError } from './api';
import { keepLast, type Sample } from './samples';

export interface Poll<T> {
  /** The last answer; kept while the next one loads, so the page never blanks or jumps. */
  data: T | undefined;
  error: ApiError | undefined;
  /** When `data` last arrived (ms). */
  updatedAt: number | undefined;
  /** Loads now (after an action), then goes on polling. */
  refresh: () => void;
}

/**
 * Loads `load` now and then every `intervalMs` while the page is visible. A change of `key`
 * loads at once; with `keepPrevious` the old data stays on screen until the new arrives
 * (filters, paging), otherwise it is dropped (another queue). Late answers of an old key are
 * ignored: the request is aborted when the key changes. With `enabled` false nothing is loaded
 * (the key may not read): no request, no data, no error.
 */
export function usePoll<T>(load: (signal: AbortSignal) => Promise<T>, intervalMs: number, key: string, keepPrevious = false, enabled = true): Poll<T> {
  const [state, setState] = useState<{ key: string; data?: T; error?: ApiError; updatedAt?: number }>({ key });
  const [nonce, setNonce] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;

  useEffect(() => {
    if (!enabled) return;
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stopped = false;
    const tick = async (): Promise<void> => {
      if (document.visibilityState !== 'hidden') {
        try {
          const data = await loadRef.current(controller.signal);
          if (stopped) return;
          setState({ key, data, updatedAt: Date.now() });
        } catch (error) {
          if (stopped || isAbort(error)) return;
          setState((s) => ({ key, data: s.key === key || keepPrevious ? s.data : undefined, updatedAt: s.updatedAt, error: toApiError(error) }));
        }
      }
      if (!stopped) timer = setTimeout(() => void tick(), intervalMs);
    };
    void tick();
    return () => {
      stopped = true;
      controller.abort();
      clearTimeout(timer);
    };
  }, [key, nonce, intervalMs, keepPrevious, enabled]);

  const refresh = useCallback(() => setNonce((n) => n + 1), []);
  if (!enabled) return { data: undefined, error: undefined, updatedAt: undefined, refresh };
  const current = state.key === key || keepPrevious;
  return { data: current ? state.data : undefined, error: state.key === key ? state.error : undefined, updatedAt: state.updatedAt, refresh };
}

/** The current time (ms), updated every `intervalMs` while `active`. */
export function useNow(intervalMs: number, active = true): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    setNow(Date.now());
    const id = setInterval(() => setNow(Date.now()), intervalMs);
    return () => clearInterval(id);
  }, [intervalMs, active]);
  return now;
}

const QUEUE_ROUTE = /^#\/queue\/(.+)$/;

function readRoute(): string | null {
  const match = QUEUE_ROUTE.exec(window.location.hash);
  if (!match) return null;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return null;
  }
}

/** The selected queue lives in the URL (`/admin/#/queue/<id>`), so a link can be shared. */
export function useSelectedQueue(): [string | null, (queueId: string | null) => void] {
  const [selected, setSelected] = useState(readRoute);
  useEffect(() => {
    const onChange = () => setSelected(readRoute());
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  const select = useCallback((queueId: string | null) => {
    window.location.hash = queueId === null ? '#/' : `#/queue/${encodeURIComponent(queueId)}`;
  }, []);
  return [selected, select];
}

/** Whether the URL shows the schedules page (`/admin/#/schedules`). */
export function useSchedulesRoute(): boolean {
  const read = () => window.location.hash === '#/schedules';
  const [on, setOn] = useState(read);
  useEffect(() => {
    const onChange = () => setOn(read());
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return on;
}

/** A value kept in sessionStorage, so a reload keeps the lock ids the console holds. */
export function useSessionState<T>(name: string, initial: T): [T, (update: (value: T) => T) => void] {
  const [value, setValue] = useState<T>(() => {
    try {
      const stored = sessionStorage.getItem(name);
      return stored === null ? initial : (JSON.parse(stored) as T);
    } catch {
      return initial;
    }
  });
  const update = useCallback(
    (fn: (value: T) => T) =>
      setValue((old) => {
        const next = fn(old);
        try {
          sessionStorage.setItem(name, JSON.stringify(next));
        } catch {
          // storage full or disabled: the value still lives for this page
        }
        return next;
      }),
    [name],
  );
  return [value, update];
}

/** A {@link Poll} that also keeps what `sample` reads from each answer, with its time, for charts. */
export interface SampledPoll<T, S> extends Poll<T> {
  /** The last `capacity` samples, oldest first. */
  samples: Sample<S>[];
}

/**
 * {@link usePoll}, keeping a bounded window of samples of its answers in memory (the last
 * `capacity`: at most a few minutes' worth, however long the page stays open). The window
 * lives as long as the component; a change of `key` keeps it.
 */
export function useSampledPoll<T, S>(
  load: (signal: AbortSignal) => Promise<T>,
  sample: (data: T) => S | undefined,
  capacity: number,
  intervalMs: number,
  key: string,
  keepPrevious = false,
  enabled = true,
): SampledPoll<T, S> {
  const kept = useRef<Sample<S>[]>([]);
  const poll = usePoll(
    async (signal) => {
      const data = await load(signal);
      const value = sample(data);
      if (value !== undefined) kept.current = keepLast(kept.current, { at: Date.now(), value }, capacity);
      return { data, samples: kept.current };
    },
    intervalMs,
    key,
    keepPrevious,
    enabled,
  );
  return { ...poll, data: poll.data?.data, samples: poll.data?.samples ?? [] };
}
