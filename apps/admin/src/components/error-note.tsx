import type { Problem } from '../access';

/** An API error as the service sent it: its `message`, `error_code` and HTTP status. */
export function ErrorNote({ error, onDismiss }: { error: Problem; onDismiss?: () => void }) {
  return (
    <div className="error-note" role="alert" data-testid="api-error" data-error-code={error.code}>
      <div className="error-text">
        <span className="error-message">{error.message}</span>
        <span className="error-meta">
          <code>{error.code}</code>
          {error.status > 0 && <span> · HTTP {error.status}</span>}
        </span>
      </div>
      {onDismiss && (
        <button type="button" className="link-button" onClick={onDismiss} aria-label="Dismiss error">
          Dismiss
        </button>
      )}
    </div>
  );
}
