import { useState } from 'react';
import type { PopResponse, QueueInfo } from '@pushpop/api-client';
import { ApiError, call, toApiError } from '../api';
import { count, plural } from '../format';
import { useSampledPoll } from '../hooks';
import { SAMPLE_CAPACITY } from '../samples';
import { segmentChain } from '../segments';
import { useApi, usePermissions } from '../session';
import { ConfirmDialog } from './confirm-dialog';
import { ErrorNote } from './error-note';
import { TrashIcon } from './icons';
import { QueueCharts, type QueueLevels } from './live-charts';
import { LockCard, type HeldLock } from './lock-card';
import { PopForm } from './pop-form';
import { PushForm } from './push-form';
import { RedriveCard } from './redrive-card';
import { ResultPanel, type ActionResult } from './result-panel';
import { SegmentChain, SegmentLegend, type SegmentRef } from './segment-chain';
import { SegmentItems } from './segment-items';
import { PauseSwitch } from './pause-switch';
import { SettingsCard } from './settings-card';
import { whyNot } from './scope-note';

const QUEUE_POLL_MS = 2000;

interface Props {
  queueId: string;
  refreshKey: number;
  held: HeldLock | undefined;
  onHeld: (lock: HeldLock | undefined) => void;
  /** After every action: the list and this panel reload at once. */
  onChanged: () => void;
}

function totals(info: QueueInfo): { segments: number; offloaded: number } {
  let segments = 0;
  let offloaded = 0;
  for (const p of Object.values(info.priorities)) {
    const chain = segmentChain(p, info.config);
    segments += chain.segments;
    offloaded += chain.offloaded;
  }
  return { segments, offloaded };
}

/** Items held pending acknowledgement: by the exclusive lock, or by all the locks of a shared queue. */
function heldItems(info: QueueInfo): number {
  return info.locks ? info.locks.item_count : (info.lock?.item_count ?? 0);
}

/** What the charts keep of each answer: a queue that does not exist holds nothing. */
function queueLevels(info: QueueInfo | null): QueueLevels {
  return info ? { waiting: info.count, held: heldItems(info) } : { waiting: 0, held: 0 };
}

/** One queue: counts, the segment chain of each priority, the lock, the actions and their results. */
export function QueuePanel({ queueId, refreshKey, held, onHeld, onChanged }: Props) {
  const api = useApi();
  const can = usePermissions();
  const queue = useSampledPoll(
    async (signal) => {
      try {
        return await call(api.GET('/queue/{queue_id}', { params: { path: { queue_id: queueId } }, signal }));
      } catch (error) {
        // A queue exists once something is pushed; before that (or after a delete) it is empty, not broken.
        if (error instanceof ApiError && error.code === 'QUEUE_NOT_FOUND') return null;
        throw error;
      }
    },
    queueLevels,
    SAMPLE_CAPACITY,
    QUEUE_POLL_MS,
    String(refreshKey),
    true,
    can.read.allowed,
  );
  const [result, setResult] = useState<ActionResult | null>(null);
  const [selectedSegment, setSelectedSegment] = useState<SegmentRef | undefined>(undefined);
  const [confirming, setConfirming] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const [deleteError, setDeleteError] = useState<ApiError | null>(null);

  const info = queue.data;
  const priorities = info ? Object.keys(info.priorities).sort((a, b) => Number(a) - Number(b)) : [];
  const sums = info ? totals(info) : undefined;
  const heldCount = info ? heldItems(info) : 0;

  const message = (text: string) => {
    setResult({ kind: 'message', text, at: Date.now() });
    onChanged();
  };
  const popped = (response: PopResponse, ack: boolean) => {
    setResult({ kind: 'pop', response, ack, at: Date.now() });
    if (ack && response.lock_id && response.lock_expires_at !== undefined) onHeld({ lockId: response.lock_id, expiresAt: response.lock_expires_at });
    onChanged();
  };
  const remove = async () => {
    setDeleting(true);
    setDeleteError(null);
    try {
      const answer = await call(api.DELETE('/queue/{queue_id}', { params: { path: { queue_id: queueId } } }));
      setConfirming(false);
      onHeld(undefined);
      message(`Deleted queue ${queueId} with ${plural(answer.items_deleted, 'item')}.`);
    } catch (e) {
      setDeleteError(toApiError(e));
    } finally {
      setDeleting(false);
    }
  };

  return (
    <div className="panel" data-testid="queue-panel" data-queue-id={queueId}>
      <div className="panel-head">
        <div className="panel-title">
          <span className="eyebrow">Queue</span>
          <h1 className="mono" title={queueId}>
            {queueId}
          </h1>
          {info?.config.paused && (
            <span className="badge badge-paused" data-testid="queue-paused">
              paused
            </span>
          )}
        </div>
        {info && <PauseSwitch queueId={queueId} paused={info.config.paused} onChanged={message} />}
        <button
          type="button"
          className="btn btn-danger-outline"
          onClick={() => {
            setDeleteError(null);
            setConfirming(true);
          }}
          disabled={info === null || !can.delete.allowed}
          title={whyNot(can.delete)}
        >
          <TrashIcon /> Delete queue
        </button>
      </div>

      {queue.error && <ErrorNote error={queue.error} />}
      {!can.read.allowed && (
        <p className="notice" data-testid="no-read">
          {can.read.reason} The console cannot show this queue’s counts, segments or lock here
          {can.push.allowed || can.pop.allowed ? '; the actions below still work.' : '.'}
        </p>
      )}

      <div className="stats">
        <div className="stat">
          <span className="stat-label">Waiting</span>
          <span className="stat-value">
            <span data-testid="queue-count">{info === undefined ? '–' : count(info?.count ?? 0)}</span>
            {info && info.delayed > 0 && (
              <span
                className="stat-sub"
                data-testid="queue-delayed"
                title="Pushed with delay_seconds, or given back and waiting out a retry delay: not visible until due"
              >
                {' '}
                · {count(info.delayed)} delayed
              </span>
            )}
          </span>
        </div>
        <div className={`stat${info?.lock || info?.locks?.count ? ' stat-lock' : ''}`}>
          <span className="stat-label">{info?.locks ? 'Held by locks' : 'Held by lock'}</span>
          <span className="stat-value" data-testid="queue-held">
            {info === undefined ? '–' : count(heldCount)}
          </span>
        </div>
        <div className="stat">
          <span className="stat-label">Segments</span>
          <span className="stat-value">
            {sums ? count(sums.segments) : info === null ? '0' : '–'}
            {sums && sums.offloaded > 0 && <span className="stat-sub"> · {count(sums.offloaded)} offloaded</span>}
          </span>
        </div>
        <div className="stat">
          <span className="stat-label">Priorities</span>
          <span className="stat-value">{info ? (priorities.length ? priorities.join(', ') : 'none') : info === null ? 'none' : '–'}</span>
        </div>
      </div>

      {can.read.allowed && <QueueCharts samples={queue.samples} />}

      {info !== undefined && <SettingsCard queueId={queueId} settings={info?.config ?? null} onSaved={message} onChanged={onChanged} />}

      {info === null && (
        <p className="notice" data-testid="queue-missing">
          There is no queue <code>{queueId}</code> yet: it exists once an item is pushed to it.
        </p>
      )}

      {info && priorities.length > 0 && (
        <section className="card" aria-label="Segments" data-testid="segments">
          <div className="card-head">
            <h3>Segments</h3>
            <SegmentLegend config={info.config} />
          </div>
          {priorities.map((p) => (
            <SegmentChain key={p} priority={p} info={info.priorities[p]} config={info.config} selected={selectedSegment} onSelect={setSelectedSegment} />
          ))}
        </section>
      )}
      {info && priorities.length === 0 && (
        <p className="notice">
          The queue is empty{heldCount > 0 ? `: its items are held by ${info.locks ? 'its locks' : 'the lock'}` : ''}
          {info.delayed > 0 ? `${heldCount > 0 ? ';' : ':'} ${plural(info.delayed, 'delayed item')} will join it when due` : ''}.
        </p>
      )}

      <div className="columns">
        <div className="column">
          {(info !== undefined || (!can.read.allowed && can.lock.allowed)) && (
            <LockCard
              queueId={queueId}
              lock={can.read.allowed ? (info?.lock ?? null) : undefined}
              locks={info?.locks ?? undefined}
              held={held}
              onHeld={onHeld}
              onResult={message}
              onChanged={onChanged}
            />
          )}
          <section className="card" aria-label="Push">
            <div className="card-head">
              <h3>Push</h3>
            </div>
            <PushForm queueId={queueId} onPushed={message} />
          </section>
          <section className="card" aria-label="Pop">
            <div className="card-head">
              <h3>Pop</h3>
            </div>
            <PopForm queueId={queueId} onPopped={popped} />
          </section>
          {info && <RedriveCard queueId={queueId} waiting={info.count} onRedriven={message} />}
        </div>
        <div className="column">
          <ResultPanel result={result} />
          {info && priorities.length > 0 && (
            <SegmentItems info={info} priorities={priorities} selected={selectedSegment} onSelect={setSelectedSegment} refreshKey={refreshKey} />
          )}
        </div>
      </div>

      <ConfirmDialog
        open={confirming}
        title={`Delete queue ${queueId}?`}
        confirmLabel="Delete queue"
        busy={deleting}
        onConfirm={() => void remove()}
        onCancel={() => setConfirming(false)}
      >
        <p>This removes {info ? plural(info.count + heldCount, 'item') : 'its items'}, every segment (offloaded ones too) and any lock. It cannot be undone.</p>
        {deleteError && <ErrorNote error={deleteError} />}
      </ConfirmDialog>
    </div>
  );
}
