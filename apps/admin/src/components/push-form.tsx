import { useState, type FormEvent, type KeyboardEvent } from 'react';
import { call, toApiError, type ApiError } from '../api';
import { useApi, usePermissions } from '../session';
import { ErrorNote } from './error-note';
import { ScopeNote, whyNot } from './scope-note';

const EXAMPLE = '{\n  "task": "send-email",\n  "to": "ada@example.com"\n}';

type Parsed = { item: Record<string, unknown> } | { problem: string };

/** The service takes JSON objects only: refuse anything else here, before a request is sent. */
export function parseItem(text: string): Parsed {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { problem: `Not valid JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    const kind = value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`;
    return { problem: `An item must be a JSON object ({…}), not ${kind}.` };
  }
  return { item: value as Record<string, unknown> };
}

export function parseInteger(text: string, min: number, max: number): number | undefined {
  if (!/^\d+$/.test(text.trim())) return undefined;
  const n = Number(text);
  return n >= min && n <= max ? n : undefined;
}

interface Props {
  queueId: string;
  onPushed: (message: string) => void;
}

/** Push one item: a JSON editor checked before sending, and a priority 0–255. */
export function PushForm({ queueId, onPushed }: Props) {
  const api = useApi();
  const allowed = usePermissions().push;
  const [text, setText] = useState(EXAMPLE);
  const [priority, setPriority] = useState('0');
  const [problem, setProblem] = useState<{ field: 'item' | 'priority'; text: string } | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);

  const push = async () => {
    if (!allowed.allowed) return;
    setError(null);
    const parsed = parseItem(text);
    if ('problem' in parsed) return setProblem({ field: 'item', text: parsed.problem });
    const p = parseInteger(priority, 0, 255);
    if (p === undefined) return setProblem({ field: 'priority', text: 'Priority must be a whole number from 0 to 255.' });
    setProblem(null);
    setBusy(true);
    try {
      const answer = await call(api.POST('/queue/{queue_id}/push', { params: { path: { queue_id: queueId } }, body: { item: parsed.item, priority: p } }));
      onPushed(answer.message);
    } catch (e) {
      setError(toApiError(e));
    } finally {
      setBusy(false);
    }
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    void push();
  };
  const shortcut = (event: KeyboardEvent) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      void push();
    }
  };

  return (
    <form className="form" onSubmit={submit} aria-label="Push an item" data-testid="push-form" noValidate>
      <label className="field">
        <span>Item (JSON object)</span>
        <textarea
          className="code-input"
          rows={6}
          value={text}
          onChange={(e) => {
            setText(e.target.value);
            setProblem(null);
          }}
          onKeyDown={shortcut}
          spellCheck={false}
          aria-invalid={problem?.field === 'item'}
          aria-describedby={problem ? 'push-problem' : undefined}
          name="item"
        />
      </label>
      {problem?.field === 'item' && <Problem text={problem.text} />}
      <div className="form-row">
        <label className="field field-inline">
          <span>Priority</span>
          <input
            type="number"
            min={0}
            max={255}
            step={1}
            value={priority}
            onChange={(e) => {
              setPriority(e.target.value);
              setProblem(null);
            }}
            name="priority"
            className="num-input"
            aria-invalid={problem?.field === 'priority'}
            aria-describedby={problem ? 'push-problem' : undefined}
          />
        </label>
        <span className="hint">0 is popped first · Ctrl+Enter pushes</span>
        <button type="submit" className="btn btn-primary" disabled={busy || !allowed.allowed} title={whyNot(allowed)}>
          Push
        </button>
      </div>
      {problem?.field === 'priority' && <Problem text={problem.text} />}
      <ScopeNote permission={allowed} />
      {error && <ErrorNote error={error} onDismiss={() => setError(null)} />}
    </form>
  );
}

function Problem({ text }: { text: string }) {
  return (
    <p className="field-problem" id="push-problem" role="alert" data-testid="push-problem">
      {text}
    </p>
  );
}
