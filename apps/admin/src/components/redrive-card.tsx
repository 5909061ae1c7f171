import { useState, type FormEvent } from 'react';
import { call, toApiError, type ApiError } from '../api';
import { count, plural } from '../format';
import { useApi, usePermissions } from '../session';
import { ConfirmDialog } from './confirm-dialog';
import { ErrorNote } from './error-note';
import { parseInteger } from './push-form';
import { ScopeNote, whyNot } from './scope-note';

const DEFAULT_MAX_ITEMS = 10000;

interface Props {
  queueId: string;
  /** Items waiting on the queue (not held by locks): what a redrive can move at most. */
  waiting: number;
  onRedriven: (message: string) => void;
}

/**
 * Redrive (`POST /queue/{id}/redrive`): moves items from the front of this queue to the tail of
 * another, or back to the queues they were dead-lettered from. Asks for a confirmation that
 * names where the items go and how many at most.
 */
export function RedriveCard({ queueId, waiting, onRedriven }: Props) {
  const api = useApi();
  const allowed = usePermissions().redrive;
  const [destination, setDestination] = useState('');
  const [maxItems, setMaxItems] = useState(String(DEFAULT_MAX_ITEMS));
  const [problem, setProblem] = useState<string | null>(null);
  const [confirming, setConfirming] = useState<{ destination: string | undefined; maxItems: number } | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);

  const ask = (event: FormEvent) => {
    event.preventDefault();
    const n = parseInteger(maxItems, 1, 100000);
    if (n === undefined) return setProblem('At most: a whole number from 1 to 100000.');
    const to = destination.trim();
    if (to === queueId) return setProblem('The destination must be another queue.');
    setProblem(null);
    setError(null);
    setConfirming({ destination: to === '' ? undefined : to, maxItems: n });
  };

  const redrive = async () => {
    if (!confirming) return;
    setBusy(true);
    setError(null);
    try {
      const body = { max_items: confirming.maxItems, ...(confirming.destination ? { destination: confirming.destination } : {}) };
      const answer = await call(api.POST('/queue/{queue_id}/redrive', { params: { path: { queue_id: queueId } }, body }));
      setConfirming(null);
      const where = confirming.destination ? `to ${confirming.destination}` : 'to the queues they were dead-lettered from';
      onRedriven(`Redrove ${plural(answer.items_moved, 'item')} of ${queueId} ${where}; ${plural(answer.items_left, 'item')} left.`);
    } catch (e) {
      setError(toApiError(e));
    } finally {
      setBusy(false);
    }
  };

  const moving = confirming ? Math.min(confirming.maxItems, waiting) : 0;
  return (
    <section className="card" aria-label="Redrive" data-testid="redrive-card">
      <div className="card-head">
        <h3>Redrive</h3>
      </div>
      <form className="form" onSubmit={ask} aria-label="Redrive items" data-testid="redrive-form" noValidate>
        <label className="field">
          <span>Destination</span>
          <input
            type="text"
            name="destination"
            value={destination}
            placeholder="the queues the items were dead-lettered from"
            onChange={(e) => {
              setDestination(e.target.value);
              setProblem(null);
            }}
          />
        </label>
        <div className="form-row">
          <label className="field field-inline">
            <span>At most</span>
            <input
              type="number"
              min={1}
              max={100000}
              step={1}
              name="max_items"
              className="num-input"
              value={maxItems}
              onChange={(e) => {
                setMaxItems(e.target.value);
                setProblem(null);
              }}
            />
          </label>
          <span className="hint">from the front, to the tail of their priority</span>
          <button type="submit" className="btn" disabled={busy || !allowed.allowed || waiting === 0} title={whyNot(allowed)} data-testid="redrive-open">
            Redrive…
          </button>
        </div>
        {problem && (
          <p className="field-problem" role="alert" data-testid="redrive-problem">
            {problem}
          </p>
        )}
        <ScopeNote permission={allowed} />
      </form>
      <ConfirmDialog
        open={confirming !== null}
        title={`Redrive queue ${queueId}?`}
        confirmLabel="Redrive"
        busy={busy}
        onConfirm={() => void redrive()}
        onCancel={() => setConfirming(null)}
      >
        <p data-testid="redrive-confirm-text">
          {confirming?.destination
            ? `This moves up to ${count(moving)} of ${plural(waiting, 'waiting item')} to the tail of queue ${confirming.destination}.`
            : `This moves up to ${count(moving)} of ${plural(waiting, 'waiting item')} back to the queues they were dead-lettered from; items never dead-lettered stay.`}{' '}
          Their delivery counts start again at 0; items held by locks stay.
        </p>
        {error && <ErrorNote error={error} />}
      </ConfirmDialog>
    </section>
  );
}
