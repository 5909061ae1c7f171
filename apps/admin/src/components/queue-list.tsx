import { useEffect, useState } from 'react';
import { call } from '../api';
import { count, plural } from '../format';
import { usePoll } from '../hooks';
import { useApi, usePermissions } from '../session';
import { ErrorNote } from './error-note';
import { FairPopForm } from './fair-pop-form';
import { LockIcon } from './icons';
import { PauseSwitch } from './pause-switch';

const PAGE_SIZE = 50;
const LIST_POLL_MS = 3000;

function useDebounced<T>(value: T, ms: number): T {
  const [debounced, setDebounced] = useState(value);
  useEffect(() => {
    const id = setTimeout(() => setDebounced(value), ms);
    return () => clearTimeout(id);
  }, [value, ms]);
  return debounced;
}

interface Props {
  selected: string | null;
  onSelect: (queueId: string) => void;
  refreshKey: number;
  /** A queue was paused or resumed from the list: everything reloads. */
  onChanged?: () => void;
}

/** The queue list, or, for a key without the read scope, a note saying so (instead of a 403 every few seconds). */
export function QueueList(props: Props) {
  const read = usePermissions().read;
  if (read.allowed) return <LiveQueueList {...props} />;
  return (
    <div className="queue-list">
      <div className="sidebar-head">
        <h2>Queues</h2>
      </div>
      <p className="empty" data-testid="no-read">
        {read.reason} Open a queue by id at the top to use it.
      </p>
    </div>
  );
}

/** `GET /queues`: a page at a time (next_cursor), filtered by prefix, refreshed every few seconds in place. */
function LiveQueueList({ selected, onSelect, refreshKey, onChanged }: Props) {
  const api = useApi();
  const [paused, setPaused] = useState(0);
  const onPaused = () => {
    setPaused((n) => n + 1);
    onChanged?.();
  };
  const [filter, setFilter] = useState('');
  const prefix = useDebounced(filter.trim(), 250);
  // Cursors of the pages walked so far; the last is the page shown (undefined: the first).
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  useEffect(() => setCursors([undefined]), [prefix]);
  const cursor = cursors[cursors.length - 1];

  const list = usePoll(
    async (signal) => {
      const page = await call(api.GET('/queues', { params: { query: { prefix: prefix || undefined, limit: PAGE_SIZE, cursor } }, signal }));
      return { ...page, prefix, page: cursors.length };
    },
    LIST_POLL_MS,
    `${prefix}\u0000${cursor ?? ''}\u0000${refreshKey}\u0000${paused}`,
    true,
  );
  const queues = list.data?.queues ?? [];
  const next = list.data?.next_cursor ?? null;

  return (
    <div className="queue-list">
      <div className="sidebar-head">
        <h2>Queues</h2>
        <span className={`live ${list.error ? 'live-error' : ''}`} title={`Refreshes every ${LIST_POLL_MS / 1000} s`}>
          {list.error ? 'stale' : 'live'}
        </span>
      </div>
      <input
        className="filter"
        type="search"
        placeholder="Filter by prefix"
        aria-label="Filter queues by prefix"
        value={filter}
        onChange={(e) => setFilter(e.target.value)}
        spellCheck={false}
      />
      {prefix !== '' && <FairPopForm prefix={prefix} onSelect={onSelect} onPopped={onPaused} />}
      {list.error && <ErrorNote error={list.error} />}
      <ul className="queues" data-testid="queue-list" data-prefix={list.data?.prefix} data-page={list.data?.page}>
        {queues.map((q) => {
          // In the ready set, as fair pops see it: items to hand out, and not paused.
          const ready = q.count > 0 && !q.paused;
          return (
            <li key={q.queue_id} className={q.paused ? 'paused' : undefined}>
              <button
                type="button"
                className={`queue-row${q.queue_id === selected ? ' selected' : ''}`}
                aria-current={q.queue_id === selected ? 'true' : undefined}
                onClick={() => onSelect(q.queue_id)}
                data-testid="queue-row"
                data-queue-id={q.queue_id}
                data-count={q.count}
                data-locked={q.locked}
                data-paused={q.paused}
                data-ready={ready}
                title={q.paused ? `${q.queue_id} (paused: pops hand out nothing)` : q.queue_id}
              >
                <span
                  className={`ready-dot${ready ? ' ready' : ''}`}
                  data-testid="ready-mark"
                  title={ready ? 'Ready: items to hand out (fair pops take from it)' : 'Not ready: nothing to hand out, or paused'}
                />
                <span className="queue-name">{q.queue_id}</span>
                {q.paused && (
                  <span className="badge badge-paused" data-testid="paused-mark">
                    paused
                  </span>
                )}
                {q.locked && <LockIcon className="locked-icon" title="Locked: items held pending acknowledgement" />}
                <span className="queue-count">{count(q.count)}</span>
              </button>
              <PauseSwitch queueId={q.queue_id} paused={q.paused} onChanged={onPaused} small />
            </li>
          );
        })}
      </ul>
      {list.data && queues.length === 0 && (
        <p className="empty">{prefix ? `No queue id starts with “${prefix}”.` : 'No queues yet. Open a queue by id and push an item to create one.'}</p>
      )}
      <div className="pager">
        <button type="button" className="btn btn-small" disabled={cursors.length === 1} onClick={() => setCursors((c) => c.slice(0, -1))}>
          ‹ Prev
        </button>
        <span className="muted">
          page {cursors.length}
          {list.data ? ` · ${plural(queues.length, 'queue')}` : ''}
        </span>
        <button type="button" className="btn btn-small" disabled={!next} onClick={() => next && setCursors((c) => [...c, next])}>
          Next ›
        </button>
      </div>
    </div>
  );
}
