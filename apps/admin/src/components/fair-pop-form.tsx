import { useState } from 'react';
import type { FairPopResponse } from '@pushpop/api-client';
import { call, toApiError, type ApiError } from '../api';
import { plural } from '../format';
import { useApi, usePermissions } from '../session';
import { ErrorNote } from './error-note';
import { whyNot } from './scope-note';

interface Props {
  /** The list's filter: the fair pop takes from the queues whose ids start with it. */
  prefix: string;
  /** Opens the queue the items came from. */
  onSelect: (queueId: string) => void;
  /** Items left a queue: the list reloads. */
  onPopped: () => void;
}

/** `POST /queues/pop?prefix=`: one pop from the next ready queue under the list's prefix, in turn (no lock). */
export function FairPopForm({ prefix, onSelect, onPopped }: Props) {
  const api = useApi();
  const allowed = usePermissions().pop;
  const [answer, setAnswer] = useState<FairPopResponse | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);

  const pop = async () => {
    setError(null);
    setBusy(true);
    try {
      const popped = await call(api.POST('/queues/pop', { params: { query: { prefix } } }));
      setAnswer(popped);
      if (popped.count > 0) onPopped();
    } catch (e) {
      setError(toApiError(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div className="fair-pop" data-testid="fair-pop-form">
      <button
        type="button"
        className="btn btn-small"
        disabled={busy || !allowed.allowed || prefix === ''}
        title={whyNot(allowed) ?? `Pop one item from the next ready queue whose id starts with “${prefix}”, in turn`}
        onClick={() => void pop()}
      >
        Fair pop
      </button>
      {answer && (
        <p className="fair-pop-result" data-testid="fair-pop-result" data-queue-id={answer.queue_id ?? ''}>
          {answer.queue_id ? (
            <>
              {plural(answer.count, 'item')} from{' '}
              <button type="button" className="link" onClick={() => onSelect(answer.queue_id!)}>
                {answer.queue_id}
              </button>
              : <code>{JSON.stringify(answer.items)}</code>
            </>
          ) : (
            `Nothing to hand out under “${prefix}”.`
          )}
        </p>
      )}
      {error && <ErrorNote error={error} onDismiss={() => setError(null)} />}
    </div>
  );
}
