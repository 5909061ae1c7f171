import { useRef, useState, type FormEvent } from 'react';
import { identityLabel, type Identity } from '../access';
import { call, type ApiError } from '../api';
import { count, duration, oneDecimal } from '../format';
import { usePoll } from '../hooks';
import { headline, rate, type Headline } from '../metrics';
import { useApi } from '../session';
import { ExternalIcon, KeyIcon, LogoIcon, SearchIcon } from './icons';

const SERVICE_POLL_MS = 5000;

type Health = { tone: 'ok' | 'warn' | 'down' | 'unknown'; label: string; detail: string };

function health(live: { data?: { uptime_seconds: number }; error?: ApiError }, ready: { data?: unknown; error?: ApiError }): Health {
  if (live.error) return { tone: 'down', label: 'unreachable', detail: live.error.message };
  if (!live.data) return { tone: 'unknown', label: 'checking', detail: 'Waiting for /health' };
  const up = `process up ${duration(live.data.uptime_seconds)}`;
  if (ready.error) return { tone: 'warn', label: 'not ready', detail: `${up}; /health/ready: ${ready.error.message} (${ready.error.code})` };
  if (!ready.data) return { tone: 'unknown', label: 'checking', detail: up };
  return { tone: 'ok', label: 'healthy', detail: `${up}; database ready` };
}

interface Props {
  onOpenQueue: (queueId: string) => void;
  /** Whether to load /metrics: not while the console waits for a key. */
  numbers: boolean;
  /** Who the console is: a key's name and scopes, `null` with keys off, `undefined` while not known. */
  identity: Identity | null | undefined;
  /** Drops the key held; offered while there is one. */
  onForget: (() => void) | undefined;
}

/** The service at a glance: name, health dot, a jump box, headline numbers from /metrics, links to the API docs, the key. */
export function Header({ onOpenQueue, numbers, identity, onForget }: Props) {
  const api = useApi();
  const live = usePoll((signal) => call(api.GET('/health', { signal })), SERVICE_POLL_MS, 'live');
  const ready = usePoll((signal) => call(api.GET('/health/ready', { signal })), SERVICE_POLL_MS, 'ready');
  const state = health(live, ready);
  const [jump, setJump] = useState('');

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const id = jump.trim();
    if (id) {
      onOpenQueue(id);
      setJump('');
    }
  };

  return (
    <header className="header">
      <a className="brand" href="#/">
        <LogoIcon />
        <span className="brand-name">pushpop</span>
        <span className="brand-sub">admin</span>
      </a>
      <span className={`health health-${state.tone}`} title={state.detail} data-testid="health" data-health={state.tone}>
        <span className="dot" aria-hidden="true" />
        {state.label}
      </span>
      <form className="jump" onSubmit={submit} role="search">
        <SearchIcon />
        <input
          aria-label="Open queue by id"
          placeholder="Open queue by id…"
          value={jump}
          onChange={(e) => setJump(e.target.value)}
          spellCheck={false}
          autoComplete="off"
        />
      </form>
      {numbers ? <ServiceNumbers /> : <span className="metrics" />}
      <nav className="links">
        <a href="#/schedules" data-testid="schedules-link">
          Schedules
        </a>
        <a href="/docs" target="_blank" rel="noreferrer">
          API docs <ExternalIcon />
        </a>
        <a href="/openapi.json" target="_blank" rel="noreferrer">
          OpenAPI <ExternalIcon />
        </a>
      </nav>
      {identity !== undefined && (
        <span className={`identity${identity ? '' : ' identity-open'}`} data-testid="identity">
          {identity && <KeyIcon />}
          <span
            className="identity-label"
            data-testid="identity-label"
            title={
              identity
                ? `The API key this console sends: ${identityLabel(identity)} (kept for this tab only)`
                : 'The service has no API keys: everything is open'
            }
          >
            {identityLabel(identity)}
          </span>
          {onForget && (
            <button type="button" className="forget" onClick={onForget} title="Forget the key (this tab keeps it until it is closed) and ask for one again">
              Forget key
            </button>
          )}
        </span>
      )}
    </header>
  );
}

/**
 * Operations per second, items in memory, offloaded segments, active actors, and the items
 * enqueued from SQL still waiting to be carried (with the oldest one's age) from /metrics.
 * /metrics needs the read scope (unless METRICS_PUBLIC): a refusal shows as a note, not an error.
 */
function ServiceNumbers() {
  const api = useApi();
  const previous = useRef<{ value: number; at: number } | undefined>(undefined);
  const metrics = usePoll(
    async (signal): Promise<Headline & { opsPerSecond: number | undefined }> => {
      const text = await call(api.GET('/metrics', { parseAs: 'text', signal }));
      const numbers = headline(text);
      const at = Date.now();
      const opsPerSecond = rate(previous.current, numbers.operations, at);
      previous.current = { value: numbers.operations, at };
      return { ...numbers, opsPerSecond };
    },
    SERVICE_POLL_MS,
    'metrics',
  );
  const refused = metrics.error && (metrics.error.status === 401 || metrics.error.status === 403) ? metrics.error : undefined;
  if (refused) {
    return (
      <span className="metrics metrics-refused" data-testid="metrics" data-refused={refused.code} title={`/metrics: ${refused.message}`}>
        {refused.status === 403 ? 'service numbers need the read scope' : 'service numbers need a key'}
      </span>
    );
  }
  const m = metrics.data;
  return (
    <dl
      className="metrics"
      title={
        metrics.error ? `/metrics: ${metrics.error.message}` : "From /metrics, every 5 s. Operations include this console's own reads (about one a second)."
      }
      data-testid="metrics"
    >
      <div>
        <dt>ops/s</dt>
        <dd data-metric="ops">{m?.opsPerSecond === undefined ? '–' : oneDecimal(m.opsPerSecond)}</dd>
      </div>
      <div>
        <dt>items in memory</dt>
        <dd data-metric="items-in-memory">{m ? count(m.itemsInMemory) : '–'}</dd>
      </div>
      <div>
        <dt>offloaded segments</dt>
        <dd data-metric="offloaded-segments">{m ? count(m.offloadedSegments) : '–'}</dd>
      </div>
      <div>
        <dt>active actors</dt>
        <dd data-metric="active-actors">{m ? count(m.activeActors) : '–'}</dd>
      </div>
      <div title="Items enqueued from SQL (pushpop_enqueue) whose transactions committed, not yet carried into their queues, and how long ago the oldest committed (the database's figures, at most 10 s old)">
        <dt>SQL-enqueued waiting</dt>
        <dd data-metric="enqueue-waiting">
          {m ? count(m.enqueueWaiting) : '–'}
          {m && m.enqueueWaiting > 0 && <span data-metric="enqueue-oldest"> · oldest {duration(m.enqueueOldestAgeSeconds)}</span>}
        </dd>
      </div>
    </dl>
  );
}
