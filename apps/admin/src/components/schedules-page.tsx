import type { components } from '@pushpop/api-client';
import { useMemo, useState, type FormEvent } from 'react';
import { call, toApiError, type ApiError } from '../api';
import { clockTime } from '../format';
import { useNow, usePoll } from '../hooks';
import { firingLabel, previewFirings } from '../schedules';
import { useApi, usePermissions } from '../session';
import { ConfirmDialog } from './confirm-dialog';
import { ErrorNote } from './error-note';
import { parseInteger, parseItem } from './push-form';
import { ScopeNote, whyNot } from './scope-note';

type Schedule = components['schemas']['ScheduleDto'];
type Draft = { id: string; queue: string; cron: string; timezone: string; item: string; priority: string; paused: boolean; editing: boolean };

const LIST_POLL_MS = 3000;
const NEW: Draft = { id: '', queue: '', cron: '0 6 * * 1-5', timezone: 'UTC', item: '{\n  "report": "daily"\n}', priority: '0', paused: false, editing: false };

const draftOf = (s: Schedule): Draft => ({
  id: s.schedule_id,
  queue: s.queue_id,
  cron: s.cron,
  timezone: s.timezone,
  item: JSON.stringify(s.item, null, 2),
  priority: String(s.priority),
  paused: s.paused,
  editing: true,
});

const bodyOf = (s: Schedule, paused: boolean) => ({ queue_id: s.queue_id, cron: s.cron, timezone: s.timezone, item: s.item, priority: s.priority, paused });

/** Schedules (`/admin/#/schedules`): the list with next and last run, pause, delete, and a form that shows the next firings before saving. */
export function SchedulesPage() {
  const api = useApi();
  const permissions = usePermissions();
  const change = permissions.settings;
  const list = usePoll((signal) => call(api.GET('/schedules', { signal })), LIST_POLL_MS, 'schedules', true, permissions.read.allowed);
  const [draft, setDraft] = useState<Draft | null>(null);
  const [deleting, setDeleting] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);

  const act = async (fn: () => Promise<unknown>) => {
    setError(null);
    setBusy(true);
    try {
      await fn();
      list.refresh();
      return true;
    } catch (e) {
      setError(toApiError(e));
      return false;
    } finally {
      setBusy(false);
    }
  };
  const path = (id: string) => ({ params: { path: { schedule_id: id } } });
  const togglePause = (s: Schedule) => act(() => call(api.PUT('/schedules/{schedule_id}', { ...path(s.schedule_id), body: bodyOf(s, !s.paused) })));
  const remove = async (id: string) => {
    if (await act(() => call(api.DELETE('/schedules/{schedule_id}', path(id))))) setDeleting(null);
  };

  const schedules = list.data?.schedules ?? [];
  return (
    <div className="panel schedules-page" data-testid="schedules-page">
      <div className="panel-head">
        <h1>Schedules</h1>
        <button
          type="button"
          className="btn btn-primary"
          disabled={!change.allowed}
          title={whyNot(change)}
          onClick={() => setDraft(NEW)}
          data-testid="new-schedule"
        >
          New schedule
        </button>
      </div>
      <p className="muted">Recurring pushes by cron expression: each firing pushes its item once, however many pushpop processes run.</p>
      {!permissions.read.allowed && <ScopeNote permission={permissions.read} />}
      {list.error && <ErrorNote error={list.error} />}
      {error && <ErrorNote error={error} onDismiss={() => setError(null)} />}
      {draft && (
        <ScheduleForm
          draft={draft}
          onCancel={() => setDraft(null)}
          onSaved={() => {
            setDraft(null);
            list.refresh();
          }}
        />
      )}
      <table className="schedules" data-testid="schedule-list">
        <thead>
          <tr>
            <th>Schedule</th>
            <th>Queue</th>
            <th>Cron</th>
            <th>Next run</th>
            <th>Last run</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {schedules.map((s) => (
            <tr key={s.schedule_id} data-testid="schedule-row" data-schedule-id={s.schedule_id} data-paused={s.paused}>
              <td className="mono">{s.schedule_id}</td>
              <td className="mono">
                <a href={`#/queue/${encodeURIComponent(s.queue_id)}`}>{s.queue_id}</a>
              </td>
              <td className="mono" title={s.timezone}>
                {s.cron} <span className="muted">{s.timezone}</span>
              </td>
              <td data-testid="next-run">
                {s.paused ? <span className="badge badge-paused">paused</span> : s.next_run_at === null ? '—' : clockTime(s.next_run_at)}
              </td>
              <td data-testid="last-run">{s.last_run_at === null ? 'never' : clockTime(s.last_run_at)}</td>
              <td className="actions">
                <button
                  type="button"
                  className="btn btn-small"
                  disabled={!change.allowed || busy}
                  title={whyNot(change)}
                  onClick={() => setDraft(draftOf(s))}
                  data-testid="edit-schedule"
                >
                  Edit
                </button>
                <button
                  type="button"
                  className="btn btn-small"
                  disabled={!change.allowed || busy}
                  title={whyNot(change)}
                  onClick={() => void togglePause(s)}
                  data-testid="pause-schedule"
                >
                  {s.paused ? 'Resume' : 'Pause'}
                </button>
                <button
                  type="button"
                  className="btn btn-small btn-danger-outline"
                  disabled={!change.allowed || busy}
                  title={whyNot(change)}
                  onClick={() => setDeleting(s.schedule_id)}
                  data-testid="delete-schedule"
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data && schedules.length === 0 && <p className="empty">No schedules yet.</p>}
      <ConfirmDialog
        open={deleting !== null}
        title={`Delete schedule ${deleting ?? ''}?`}
        confirmLabel="Delete"
        busy={busy}
        onConfirm={() => deleting && void remove(deleting)}
        onCancel={() => setDeleting(null)}
      >
        It fires no more. Items it already pushed stay in their queue.
      </ConfirmDialog>
    </div>
  );
}

/** Create or edit a schedule; the next firings are computed in the browser as the expression is typed. */
function ScheduleForm({ draft, onCancel, onSaved }: { draft: Draft; onCancel: () => void; onSaved: () => void }) {
  const api = useApi();
  const [d, setD] = useState(draft);
  const [problem, setProblem] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const now = useNow(1000);
  const preview = useMemo(() => previewFirings(d.cron, d.timezone.trim() || 'UTC', now), [d.cron, d.timezone, now]);
  const set = (patch: Partial<Draft>) => {
    setD((old) => ({ ...old, ...patch }));
    setProblem(null);
  };

  const save = async (event: FormEvent) => {
    event.preventDefault();
    setError(null);
    const parsed = parseItem(d.item);
    if ('problem' in parsed) return setProblem(parsed.problem);
    const priority = parseInteger(d.priority, 0, 255);
    if (priority === undefined) return setProblem('Priority must be a whole number from 0 to 255.');
    if (!d.id.trim() || !d.queue.trim()) return setProblem('A schedule needs an id and a queue.');
    if ('problem' in preview) return setProblem(preview.problem);
    setBusy(true);
    try {
      const body = { queue_id: d.queue.trim(), cron: d.cron.trim(), timezone: d.timezone.trim() || 'UTC', item: parsed.item, priority, paused: d.paused };
      await call(api.PUT('/schedules/{schedule_id}', { params: { path: { schedule_id: d.id.trim() } }, body }));
      onSaved();
    } catch (e) {
      setError(toApiError(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="card form schedule-form" onSubmit={(e) => void save(e)} aria-label="Schedule" data-testid="schedule-form" noValidate>
      <div className="card-head">
        <h3>{d.editing ? `Edit ${d.id}` : 'New schedule'}</h3>
      </div>
      <div className="form-row">
        <label className="field">
          <span>Schedule id</span>
          <input name="schedule_id" value={d.id} readOnly={d.editing} onChange={(e) => set({ id: e.target.value })} spellCheck={false} />
        </label>
        <label className="field">
          <span>Queue</span>
          <input name="queue_id" value={d.queue} onChange={(e) => set({ queue: e.target.value })} spellCheck={false} />
        </label>
      </div>
      <div className="form-row">
        <label className="field">
          <span>Cron (5 fields, or 6 with seconds first)</span>
          <input name="cron" className="mono" value={d.cron} onChange={(e) => set({ cron: e.target.value })} spellCheck={false} />
        </label>
        <label className="field">
          <span>Time zone</span>
          <input name="timezone" value={d.timezone} onChange={(e) => set({ timezone: e.target.value })} spellCheck={false} />
        </label>
      </div>
      <div className="preview" data-testid="schedule-preview" aria-live="polite">
        {'problem' in preview ? (
          <p className="field-problem" data-testid="preview-problem">
            {preview.problem}
          </p>
        ) : (
          <>
            <span className="muted">Next {preview.times.length} firings:</span>
            <ol>
              {preview.times.map((t) => (
                <li key={t} data-testid="preview-time" data-time={t}>
                  {firingLabel(t, d.timezone.trim() || 'UTC')}
                </li>
              ))}
            </ol>
          </>
        )}
      </div>
      <label className="field">
        <span>Item (JSON object)</span>
        <textarea className="code-input" rows={4} name="item" value={d.item} onChange={(e) => set({ item: e.target.value })} spellCheck={false} />
      </label>
      <div className="form-row">
        <label className="field field-inline">
          <span>Priority</span>
          <input type="number" min={0} max={255} className="num-input" name="priority" value={d.priority} onChange={(e) => set({ priority: e.target.value })} />
        </label>
        <label className="field field-inline">
          <input type="checkbox" name="paused" checked={d.paused} onChange={(e) => set({ paused: e.target.checked })} />
          <span>Paused</span>
        </label>
        <button type="button" className="btn" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="btn btn-primary" disabled={busy} data-testid="save-schedule">
          Save
        </button>
      </div>
      {problem && (
        <p className="field-problem" role="alert" data-testid="schedule-problem">
          {problem}
        </p>
      )}
      {error && <ErrorNote error={error} onDismiss={() => setError(null)} />}
    </form>
  );
}
