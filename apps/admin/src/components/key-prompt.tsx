import { useRef, useState, type FormEvent } from 'react';
import { checkKeyInput, type Problem } from '../access';
import { toApiError } from '../api';
import { ErrorNote } from './error-note';

interface Props {
  /** Why the service asked again: the key held was refused (a first visit has none). */
  problem: Problem | undefined;
  /** Tries the key with `/whoami`; throws the API's error when it is refused. */
  onKey: (key: string) => Promise<void>;
}

/**
 * Asks for an API key when the service answered 401: a form in the page (no browser prompt),
 * the key in a password field. The key is tried with `GET /whoami` before it is kept.
 */
export function KeyPrompt({ problem, onKey }: Props) {
  const [text, setText] = useState('');
  const [error, setError] = useState<Problem | null>(null);
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const checked = checkKeyInput(text);
    if ('problem' in checked) {
      setError({ status: 0, code: 'INVALID_KEY', message: checked.problem });
      input.current?.focus();
      return;
    }
    setError(null);
    setBusy(true);
    try {
      await onKey(checked.key);
      // The console remounts with the key: this form is gone.
    } catch (e) {
      setError(toApiError(e));
      setBusy(false);
      input.current?.select();
    }
  };

  const shown = error ?? problem;
  return (
    <div className="key-prompt-wrap">
      <form className="card key-prompt" onSubmit={(e) => void submit(e)} aria-labelledby="key-prompt-title" data-testid="key-prompt" noValidate>
        <h1 id="key-prompt-title">API key</h1>
        <p className="muted">
          This service asks for an API key. The console sends it with every call and keeps it for this browser tab only (session storage): closing the tab
          forgets it.
        </p>
        <label className="field">
          <span>Key</span>
          <input
            ref={input}
            type="password"
            name="api-key"
            value={text}
            onChange={(e) => setText(e.target.value)}
            autoComplete="off"
            spellCheck={false}
            autoFocus
            aria-invalid={error !== null}
          />
        </label>
        {shown && <ErrorNote error={shown} />}
        <div className="form-row">
          <span className="hint">Its name and scopes then show at the top right.</span>
          <button type="submit" className="btn btn-primary" disabled={busy}>
            Use key
          </button>
        </div>
      </form>
    </div>
  );
}
