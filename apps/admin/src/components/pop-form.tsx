import { useState } from 'react';
import type { PopResponse } from '@pushpop/api-client';
import { call, toApiError, type ApiError } from '../api';
import { useApi, usePermissions } from '../session';
import { ErrorNote } from './error-note';
import { ScopeNote, whyNot } from './scope-note';
import { parseInteger } from './push-form';

interface Props {
  queueId: string;
  onPopped: (response: PopResponse, ack: boolean) => void;
}

/** Pop up to `depth` items, or pop them under an acknowledgement lock for `ttl` seconds. */
export function PopForm({ queueId, onPopped }: Props) {
  const api = useApi();
  const allowed = usePermissions().pop;
  const [depth, setDepth] = useState('1');
  const [ttl, setTtl] = useState('30');
  const [problem, setProblem] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);

  const pop = async (ack: boolean) => {
    if (!allowed.allowed) return;
    setError(null);
    const d = parseInteger(depth, 1, 100);
    if (d === undefined) return setProblem('Depth must be a whole number from 1 to 100.');
    const t = parseInteger(ttl, 1, 300);
    if (ack && t === undefined) return setProblem('Lock TTL must be a whole number of seconds from 1 to 300.');
    setProblem(null);
    setBusy(true);
    try {
      // With the items' headers: the result shows them beside the items.
      const query = ack ? { depth: d, require_ack: true, ttl_seconds: t, include_headers: true } : { depth: d, include_headers: true };
      const answer = await call(api.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: queueId }, query } }));
      onPopped(answer, ack);
    } catch (e) {
      setError(toApiError(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="form" data-testid="pop-form">
      <div className="form-row">
        <label className="field field-inline">
          <span>Depth</span>
          <input type="number" min={1} max={100} value={depth} onChange={(e) => setDepth(e.target.value)} name="depth" className="num-input" />
        </label>
        <button type="button" className="btn" disabled={busy || !allowed.allowed} title={whyNot(allowed)} onClick={() => void pop(false)}>
          Pop
        </button>
      </div>
      <div className="form-row">
        <label className="field field-inline">
          <span>Lock TTL (s)</span>
          <input type="number" min={1} max={300} value={ttl} onChange={(e) => setTtl(e.target.value)} name="ttl" className="num-input" />
        </label>
        <button type="button" className="btn" disabled={busy || !allowed.allowed} title={whyNot(allowed)} onClick={() => void pop(true)}>
          Pop with ack
        </button>
      </div>
      {problem && (
        <p className="field-problem" role="alert">
          {problem}
        </p>
      )}
      <ScopeNote permission={allowed} />
      {error && <ErrorNote error={error} onDismiss={() => setError(null)} />}
    </div>
  );
}
