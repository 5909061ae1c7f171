import { useEffect, useState } from 'react';
import type { QueueInfo, SharedLocksInfo } from '@pushpop/api-client';
import { call, toApiError, type ApiError } from '../api';
import { clockTime, count, plural } from '../format';
import { useNow } from '../hooks';
import { nextExpiry, releaseMessage, remaining } from '../settings';
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

interface Props {
  queueId: string;
  /** The queue's lock; `undefined` when the key may not read the queue, so the console cannot see it. */
  lock: LockInfo | null | undefined;
  /** A queue in shared lock mode: its live locks (then `lock` is null). */
  locks?: SharedLocksInfo;
  held: HeldLock | undefined;
  onHeld: (lock: HeldLock | undefined) => void;
  onResult: (message: string) => void;
  /** After a failed action too: an error such as LOCK_NOT_FOUND means the lock changed elsewhere. */
  onChanged: () => void;
}

/**
 * The queue's acknowledgement lock: a live countdown to `expires_at` (ticks every 200 ms), and
 * acknowledge / extend / release with the lock id the console got from its own pop. A shared
 * queue shows its locks instead: how many, the items they hold, the next expiry.
 */
export function LockCard({ queueId, lock, locks, held, onHeld, onResult, onChanged }: Props) {
  const api = useApi();
  const allowed = usePermissions().lock;
  const now = useNow(200, Boolean(lock) || Boolean(locks?.count));
  const [lockId, setLockId] = useState(held?.lockId ?? '');
  useEffect(() => setLockId(held?.lockId ?? ''), [held?.lockId]);
  const [ttl, setTtl] = useState('30');
  /** A release's own retry delay (blank: the queue's). */
  const [delay, setDelay] = useState('');
  const [error, setError] = useState<ApiError | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const run = async (action: 'acknowledge' | 'extend' | 'release') => {
    if (!allowed.allowed) return;
    setError(null);
    const id = lockId.trim();
    const t = parseInteger(ttl, 1, 300);
    if (action === 'extend' && t === undefined) return setProblem('TTL must be a whole number of seconds from 1 to 300.');
    const d = delay.trim() === '' ? undefined : parseInteger(delay, 0, 900);
    if (action === 'release' && delay.trim() !== '' && d === undefined)
      return setProblem('Delay must be a whole number of seconds from 0 to 900, or blank for the queue’s retry delay.');
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
        const body = d === undefined ? { lock_id: id } : { lock_id: id, delay_seconds: d };
        const answer = await call(api.POST('/queue/{queue_id}/release', { params: { path }, body }));
        onHeld(undefined);
        onResult(releaseMessage(answer, locks ? 'shared' : 'exclusive'));
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
  const live = lock || (locks && locks.count > 0);

  return (
    <section
      className={`card lock-card${live ? ' lock-active' : ''}`}
      data-testid="lock-card"
      data-lock-mode={locks ? 'shared' : 'exclusive'}
      aria-label="Lock"
    >
      <div className="card-head">
        <h3>
          <LockIcon /> {locks ? 'Locks (shared)' : 'Lock'}
        </h3>
        {locks ? (
          <span className={`badge${locks.count > 0 ? ' badge-lock' : ''}`} data-testid="lock-items">
            {locks.count > 0 ? `${plural(locks.item_count, 'item')} held` : 'none'}
          </span>
        ) : lock ? (
          <span className="badge badge-lock" data-testid="lock-items">
            {plural(lock.item_count, 'item')} held
          </span>
        ) : (
          <span className="badge">{lock === undefined ? 'not shown' : 'none'}</span>
        )}
      </div>
      {locks ? (
        <SharedLocks locks={locks} now={now} held={held} />
      ) : lock ? (
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
          Without the read scope the console cannot see the queue’s lock. A lock_id from “Pop with ack” (or one pasted in) can still be acknowledged, extended
          or released.
        </p>
      ) : (
        <p className="muted small">
          {held
            ? 'The queue has no active lock: it was acknowledged or released elsewhere, or it expired.'
            : 'No lock. “Pop with ack” takes one; while it lasts every pop answers 423 QUEUE_LOCKED.'}
        </p>
      )}
      {(live || held || lock === undefined) && (
        <div className="form">
          <label className="field">
            <span>lock_id {held && held.lockId === lockId.trim() ? <em className="muted">(from this console’s pop)</em> : null}</span>
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
            <button
              type="button"
              className="btn btn-primary"
              disabled={busy || !allowed.allowed}
              title={whyNot(allowed)}
              onClick={() => void run('acknowledge')}
            >
              Acknowledge
            </button>
            <button type="button" className="btn" disabled={busy || !allowed.allowed} title={whyNot(allowed)} onClick={() => void run('release')}>
              Release
            </button>
            <label className="field field-inline" title="Seconds the released items wait before they are visible again (blank: the queue’s retry delay)">
              <span>after (s)</span>
              <input
                type="number"
                min={0}
                max={900}
                value={delay}
                placeholder="queue’s"
                onChange={(e) => setDelay(e.target.value)}
                className="num-input"
                name="release-delay"
              />
            </label>
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

/** A shared queue's locks (`locks` of `GET /queue/{id}`): how many live, the items they hold, the next expiry. */
function SharedLocks({ locks, now, held }: { locks: SharedLocksInfo; now: number; held: HeldLock | undefined }) {
  const next = nextExpiry(locks, now / 1000);
  if (locks.count === 0) {
    return (
      <p className="muted small" data-testid="shared-locks" data-count={0}>
        {held
          ? 'No lock lives: the console’s lock was acknowledged or released elsewhere, or it expired.'
          : 'No lock. Shared lock mode: each “Pop with ack” takes the next items under a lock of its own, and other pops go on meanwhile.'}
      </p>
    );
  }
  return (
    <div
      className="lock-status"
      data-testid="shared-locks"
      data-count={locks.count}
      data-items={locks.item_count}
      data-next-expires-at={locks.next_expires_at ?? undefined}
    >
      <div className="lock-figures">
        <span>
          <strong data-testid="shared-lock-count">{count(locks.count)}</strong> {locks.count === 1 ? 'lock' : 'locks'}
        </span>
        <span>
          <strong data-testid="shared-lock-items">{count(locks.item_count)}</strong> {locks.item_count === 1 ? 'item' : 'items'} held
        </span>
      </div>
      <div className="countdown" data-testid="shared-lock-next">
        {next.kind === 'in' ? (
          <>
            next expiry in <strong>{next.text}</strong>
          </>
        ) : (
          'next expiry due: its items go back on the queue’s next operation or sweep'
        )}
      </div>
      {locks.next_expires_at !== null && <div className="muted small">next expiry at {clockTime(locks.next_expires_at)}</div>}
    </div>
  );
}
