import { useEffect, useState } from 'react';
import type { QueueInfo } from '@pushpop/api-client';
import { call, toApiError, type ApiError } from '../api';
import { clockTime, oneDecimal, plural } from '../format';
import { useNow } from '../hooks';
import { useApi, usePermissions } from '../session';
import { ErrorNote } from './error-note';
import { LockIcon } from './icons';
import { parseInteger } from './push-form';
import { ScopeNote, whyNot } from './scope-note';

/** A lock this console took with its own pop-with-ack (the service never shows a lock's id). */
export interface HeldLock {
  lockId: string;
  expiresAt: number;
}

type LockInfo = NonNullable<QueueInfo['lock']>;

function remaining(seconds: number): string {
  if (seconds <= 0) return 'expired';
  if (seconds < 60) return `${oneDecimal(seconds)} s`;
  const m = Math.floor(seconds / 60);
  const s = seconds - m * 60;
  return `${m}:${s < 10 ? '0' : ''}${oneDecimal(s)}`;
}

interface Props {
  queueId: string;
  /** The queue's lock; `undefined` when the key may not read the queue, so the console cannot see it. */
  lock: LockInfo | null | undefined;
  held: HeldLock | undefined;
  onHeld: (lock: HeldLock | undefined) => void;
  onResult: (message: string) => void;
  /** After a failed action too: an error such as LOCK_NOT_FOUND means the lock changed elsewhere. */
  onChanged: () => void;
}

/**
 * The queue's acknowledgement lock: a live countdown to `expires_at` (ticks every 200 ms), and
 * acknowledge / extend / release with the lock id the console got from its own pop.
 */
export function LockCard({ queueId, lock, held, onHeld, onResult, onChanged }: Props) {
  const api = useApi();
  const allowed = usePermissions().lock;
  const now = useNow(200, Boolean(lock));
  const [lockId, setLockId] = useState(held?.lockId ?? '');
  useEffect(() => setLockId(held?.lockId ?? ''), [held?.lockId]);
  const [ttl, setTtl] = useState('30');
  const [error, setError] = useState<ApiError | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const run = async (action: 'acknowledge' | 'extend' | 'release') => {
    if (!allowed.allowed) return;
    setError(null);
    const id = lockId.trim();
    const t = parseInteger(ttl, 1, 300);
    if (action === 'extend' && t === undefined) return setProblem('TTL must be a whole number of seconds from 1 to 300.');
    setProblem(null);
    setBusy(true);
    const path = { queue_id: queueId };
    try {
      if (action === 'acknowledge') {
        const answer = await call(api.POST('/queue/{queue_id}/acknowledge', { params: { path }, body: { lock_id: id } }));
        onHeld(undefined);
        onResult(`Acknowledged ${plural(answer.items_acknowledged, 'item')}: gone for good.`);
      } else if (action === 'extend') {
        const answer = await call(api.POST('/queue/{queue_id}/extend-lock', { params: { path }, body: { lock_id: id, ttl_seconds: t } }));
        onHeld({ lockId: answer.lock_id, expiresAt: answer.lock_expires_at });
        onResult(`Lock extended: it now expires at ${clockTime(answer.lock_expires_at)}.`);
      } else {
        const answer = await call(api.POST('/queue/{queue_id}/release', { params: { path }, body: { lock_id: id } }));
        onHeld(undefined);
        onResult(`Released: ${plural(answer.items_returned, 'item')} back at the front of ${answer.items_returned === 1 ? 'its priority' : 'their priorities'}.`);
      }
    } catch (e) {
      setError(toApiError(e));
      onChanged();
    } finally {
      setBusy(false);
    }
  };

  const left = lock ? lock.expires_at - now / 1000 : 0;
  const span = lock ? Math.max(0.001, lock.expires_at - lock.created_at) : 1;

  return (
    <section className={`card lock-card${lock ? ' lock-active' : ''}`} data-testid="lock-card" aria-label="Lock">
      <div className="card-head">
        <h3>
          <LockIcon /> Lock
        </h3>
        {lock ? (
          <span className="badge badge-lock" data-testid="lock-items">
            {plural(lock.item_count, 'item')} held
          </span>
        ) : (
          <span className="badge">{lock === undefined ? 'not shown' : 'none'}</span>
        )}
      </div>
      {lock ? (
        <div className="lock-status">
          <div className="countdown" data-testid="lock-countdown" data-expires-at={lock.expires_at}>
            {left > 0 ? (
              <>
                expires in <strong>{remaining(left)}</strong>
              </>
            ) : (
              'expired: the items go back to the queue on its next operation or sweep'
            )}
          </div>
          <div className="bar" aria-hidden="true">
            <span style={{ width: `${Math.max(0, Math.min(1, left / span)) * 100}%` }} />
          </div>
          <div className="muted small">
            created {clockTime(lock.created_at)} · expires {clockTime(lock.expires_at)}
          </div>
        </div>
      ) : lock === undefined ? (
        <p className="muted small" data-testid="lock-unknown">
          Without the read scope the console cannot see the queue’s lock. A lock_id from “Pop with ack” (or one pasted in) can still be acknowledged,
          extended or released.
        </p>
      ) : (
        <p className="muted small">
          {held
            ? 'The queue has no active lock: it was acknowledged or released elsewhere, or it expired.'
            : 'No lock. “Pop with ack” takes one; while it lasts every pop answers 423 QUEUE_LOCKED.'}
        </p>
      )}
      {(lock || held || lock === undefined) && (
        <div className="form">
          <label className="field">
            <span>
              lock_id {held && held.lockId === lockId.trim() ? <em className="muted">(from this console’s pop)</em> : null}
            </span>
            <div className="input-with-action">
              <input
                className="mono"
                value={lockId}
                onChange={(e) => setLockId(e.target.value)}
                placeholder="lock_id from a pop with require_ack"
                spellCheck={false}
                name="lock_id"
                data-testid="lock-id"
              />
              {held && (
                <button type="button" className="link-button" onClick={() => onHeld(undefined)} title="Forget this lock id">
                  Forget
                </button>
              )}
            </div>
          </label>
          <div className="form-row">
            <button type="button" className="btn btn-primary" disabled={busy || !allowed.allowed} title={whyNot(allowed)} onClick={() => void run('acknowledge')}>
              Acknowledge
            </button>
            <button type="button" className="btn" disabled={busy || !allowed.allowed} title={whyNot(allowed)} onClick={() => void run('release')}>
              Release
            </button>
            <span className="spacer" />
            <label className="field field-inline">
              <span>TTL (s)</span>
              <input type="number" min={1} max={300} value={ttl} onChange={(e) => setTtl(e.target.value)} className="num-input" name="extend-ttl" />
            </label>
            <button type="button" className="btn" disabled={busy || !allowed.allowed} title={whyNot(allowed)} onClick={() => void run('extend')}>
              Extend
            </button>
          </div>
          {problem && (
            <p className="field-problem" role="alert">
              {problem}
            </p>
          )}
          <ScopeNote permission={allowed} />
        </div>
      )}
      {error && <ErrorNote error={error} onDismiss={() => setError(null)} />}
    </section>
  );
}
