import { useState } from 'react';
import { call, toApiError, type ApiError } from '../api';
import { useApi, usePermissions } from '../session';
import { ErrorNote } from './error-note';
import { whyNot } from './scope-note';

interface Props {
  queueId: string;
  /** Whether the queue is paused now (`config.paused`, or `paused` of its list row). */
  paused: boolean;
  onChanged: (message: string) => void;
  /** `small`: the list's form, without the error note (the panel's switch shows it). */
  small?: boolean;
}

/**
 * Pauses or resumes a queue (`PUT /queue/{id}/settings` with `paused`): while paused, pops hand
 * out nothing; pushes, locks and everything else go on. Needs the admin scope.
 */
export function PauseSwitch({ queueId, paused, onChanged, small }: Props) {
  const api = useApi();
  const allowed = usePermissions().settings;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);

  const toggle = async () => {
    setBusy(true);
    setError(null);
    try {
      const answer = await call(api.PUT('/queue/{queue_id}/settings', { params: { path: { queue_id: queueId } }, body: { paused: !paused } }));
      onChanged(answer.paused ? `Paused ${queueId}: pops hand out nothing until it is resumed.` : `Resumed ${queueId}: pops hand out items again.`);
    } catch (e) {
      setError(toApiError(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <span className={`pause-switch${small ? ' pause-switch-small' : ''}`}>
      <button
        type="button"
        role="switch"
        aria-checked={paused}
        aria-label={paused ? `Resume ${queueId}` : `Pause ${queueId}`}
        className={`btn ${small ? 'btn-small' : ''} ${paused ? 'btn-paused' : ''}`}
        onClick={() => void toggle()}
        disabled={busy || !allowed.allowed}
        title={whyNot(allowed) ?? (paused ? 'Paused: pops hand out nothing. Click to resume.' : 'Click to pause: pops will hand out nothing.')}
        data-testid={small ? 'list-pause-switch' : 'pause-switch'}
        data-paused={paused}
      >
        {paused ? '▶ Resume' : '❚❚ Pause'}
      </button>
      {!small && error && <ErrorNote error={error} onDismiss={() => setError(null)} />}
    </span>
  );
}
