import { useRef, useState, type FormEvent } from 'react';
import { api, call, type ApiError } from '../api';
import { count, duration, oneDecimal } from '../format';
import { usePoll } from '../hooks';
import { headline, rate, type Headline } from '../metrics';
import { ExternalIcon, LogoIcon, SearchIcon } from './icons';

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

/** The service at a glance: name, health dot, a jump box, headline numbers from /metrics, links to the API docs. */
export function Header({ onOpenQueue }: { onOpenQueue: (queueId: string) => void }) {
  const live = usePoll((signal) => call(api.GET('/health', { signal })), SERVICE_POLL_MS, 'live');
  const ready = usePoll((signal) => call(api.GET('/health/ready', { signal })), SERVICE_POLL_MS, 'ready');
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
  const state = health(live, ready);
  const m = metrics.data;
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
      <dl
        className="metrics"
        title={metrics.error ? `/metrics: ${metrics.error.message}` : "From /metrics, every 5 s. Operations include this console's own reads (about one a second)."}
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
      </dl>
      <nav className="links">
        <a href="/docs" target="_blank" rel="noreferrer">
          API docs <ExternalIcon />
        </a>
        <a href="/openapi.json" target="_blank" rel="noreferrer">
          OpenAPI <ExternalIcon />
        </a>
      </nav>
    </header>
  );
}
