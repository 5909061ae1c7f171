import type { PopResponse } from '@pushpop/api-client';
import { clockTime, plural } from '../format';

export type ActionResult = { at: number } & ({ kind: 'pop'; response: PopResponse; ack: boolean } | { kind: 'message'; text: string });

/** What the last action returned: popped items in full, or the service's message. */
export function ResultPanel({ result }: { result: ActionResult | null }) {
  return (
    <section className="card result" data-testid="result" aria-label="Result" aria-live="polite">
      <div className="card-head">
        <h3>Result</h3>
        {result && <span className="muted small">{clockTime(result.at / 1000)}</span>}
      </div>
      {!result && <p className="muted small">Popped items and answers of the actions show up here.</p>}
      {result?.kind === 'message' && <p data-testid="result-message">{result.text}</p>}
      {result?.kind === 'pop' && (
        <>
          <p data-testid="result-message">
            {result.response.count === 0
              ? 'The queue was empty: nothing popped.'
              : `Popped ${plural(result.response.count, 'item')}${result.response.locked ? ', held under a lock until acknowledged' : ''}.`}
          </p>
          {result.response.lock_id && (
            <p className="small">
              lock_id <code data-testid="result-lock-id">{result.response.lock_id}</code>
            </p>
          )}
          {result.response.delivery_counts && result.response.delivery_counts.length > 0 && (
            <p className="small">
              deliveries <code data-testid="result-deliveries">{result.response.delivery_counts.join(', ')}</code>
              <span className="muted"> (this one included, per item)</span>
            </p>
          )}
          {result.response.items.length > 0 && (
            <pre className="json" data-testid="popped-items">
              {JSON.stringify(result.response.items, null, 2)}
            </pre>
          )}
          {result.response.headers?.some((h) => Object.keys(h).length > 0) && (
            <>
              <p className="small">headers, per item</p>
              <pre className="json" data-testid="popped-headers">
                {JSON.stringify(result.response.headers, null, 2)}
              </pre>
            </>
          )}
        </>
      )}
    </section>
  );
}
