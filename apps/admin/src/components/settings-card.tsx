import { useState, type FormEvent } from 'react';
import type { QueueSettings } from '@pushpop/api-client';
import { call, toApiError, type ApiError } from '../api';
import { count } from '../format';
import {
  describeRetry,
  describeSettings,
  settingsForm,
  settingsPatch,
  type LockMode,
  type RetryBackoff,
  type SettingsField,
  type SettingsForm,
} from '../settings';
import { useApi, usePermissions } from '../session';
import { ErrorNote } from './error-note';
import { ScopeNote, whyNot } from './scope-note';

interface Props {
  queueId: string;
  /** The queue's settings (`config` of `GET /queue/{id}`); `null` for a queue that does not exist yet. */
  settings: QueueSettings | null;
  onSaved: (message: string) => void;
  /** After a refusal too: QUEUE_NOT_EMPTY or QUEUE_LOCKED means the queue is not as shown. */
  onChanged: () => void;
}

/** One of the settings form's numeric fields (`min`, default 1, to `max`). */
function NumberField(props: {
  name: SettingsField;
  label: string;
  min?: number;
  step?: number;
  max: number;
  placeholder: string;
  value: string;
  onChange: (value: string) => void;
  invalid: boolean;
}) {
  return (
    <label className="field">
      <span>{props.label}</span>
      <input
        type="number"
        min={props.min ?? 1}
        step={props.step}
        max={props.max}
        name={props.name}
        value={props.value}
        placeholder={props.placeholder}
        onChange={(e) => props.onChange(e.target.value)}
        aria-invalid={props.invalid}
      />
    </label>
  );
}

/** Where a queue id leads in the console: its own view (`#/queue/<id>`), a link that can be shared. */
export function queueHref(queueId: string): string {
  return `#/queue/${encodeURIComponent(queueId)}`;
}

/**
 * The queue's settings, and (with the admin scope) a form that changes them with
 * `PUT /queue/{id}/settings`. A refusal (409 QUEUE_NOT_EMPTY or QUEUE_LOCKED, 400) shows the
 * service's message under the form, which keeps what was typed.
 */
export function SettingsCard({ queueId, settings, onSaved, onChanged }: Props) {
  const api = useApi();
  const allowed = usePermissions().settings;
  const [form, setForm] = useState<SettingsForm | null>(null);
  const [problem, setProblem] = useState<{ field: SettingsField; text: string } | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);

  const edit = () => {
    setForm(settingsForm(settings));
    setProblem(null);
    setError(null);
  };
  const change = <K extends SettingsField>(field: K, value: SettingsForm[K]) => {
    setForm((f) => (f ? { ...f, [field]: value } : f));
    setProblem(null);
  };
  const save = async (event: FormEvent) => {
    event.preventDefault();
    if (!form || !allowed.allowed) return;
    setError(null);
    const checked = settingsPatch(form, settings);
    if ('problem' in checked) return setProblem({ field: checked.field, text: checked.problem });
    setProblem(null);
    // Nothing changed on an existing queue: nothing to send. (On a queue that does not exist yet
    // an empty change creates it with the service's defaults.)
    if (settings !== null && Object.keys(checked.patch).length === 0) return setForm(null);
    setBusy(true);
    try {
      const answer = await call(api.PUT('/queue/{queue_id}/settings', { params: { path: { queue_id: queueId } }, body: checked.patch }));
      setForm(null);
      onSaved(`Settings of ${queueId} saved: ${describeSettings(answer)}.`);
    } catch (e) {
      setError(toApiError(e));
      onChanged();
    } finally {
      setBusy(false);
    }
  };

  const invalid = (field: SettingsField) => problem?.field === field;

  return (
    <section className="card settings-card" aria-label="Settings" data-testid="settings">
      <div className="card-head">
        <h3>Settings</h3>
        {!form && (
          <button type="button" className="btn btn-small" onClick={edit} disabled={!allowed.allowed} title={whyNot(allowed)} data-testid="settings-edit">
            Edit
          </button>
        )}
      </div>
      {!form && settings && (
        <dl className="settings" data-testid="settings-values">
          <Setting name="segment_size" value={count(settings.segment_size)} hint="items per segment" />
          <Setting name="buffer_segments" value={count(settings.buffer_segments)} hint="kept out of the offload store" />
          <Setting name="lock_mode" value={settings.lock_mode} hint={settings.lock_mode === 'shared' ? 'a lock per pop with ack' : 'one lock at a time'} />
          <Setting name="max_deliveries" value={settings.max_deliveries === null ? 'no limit' : count(settings.max_deliveries)} />
          <div className="setting" data-setting="dead_letter_queue">
            <dt>dead_letter_queue</dt>
            <dd>
              {settings.dead_letter_queue === null ? (
                <span className="muted">none</span>
              ) : (
                <a className="mono" href={queueHref(settings.dead_letter_queue)} data-testid="dlq-link" title={`Open queue ${settings.dead_letter_queue}`}>
                  {settings.dead_letter_queue}
                </a>
              )}
            </dd>
          </div>
          <Setting name="paused" value={settings.paused ? 'yes' : 'no'} hint={settings.paused ? 'pops hand out nothing' : undefined} />
          <Setting name="retry_delay" value={describeRetry(settings)} hint="after an expiry or release" />
          <Setting name="max_in_flight" value={settings.max_in_flight === null ? 'no limit' : count(settings.max_in_flight)} hint="items held by locks" />
          <Setting name="max_pops_per_second" value={settings.max_pops_per_second === null ? 'no limit' : String(settings.max_pops_per_second)} />
        </dl>
      )}
      {!form && !settings && (
        <p className="muted small">The queue does not exist yet: it has the service’s default settings, and saving settings creates it.</p>
      )}
      {form && (
        <form className="form" onSubmit={(e) => void save(e)} aria-label="Queue settings" data-testid="settings-form" noValidate>
          <div className="settings-grid">
            <NumberField
              name="segment_size"
              label="segment_size (1–10,000)"
              max={10000}
              placeholder="service default"
              value={form.segment_size}
              onChange={(value) => change('segment_size', value)}
              invalid={invalid('segment_size')}
            />
            <NumberField
              name="buffer_segments"
              label="buffer_segments (1–1,000)"
              max={1000}
              placeholder="service default"
              value={form.buffer_segments}
              onChange={(value) => change('buffer_segments', value)}
              invalid={invalid('buffer_segments')}
            />
            <label className="field">
              <span>lock_mode</span>
              <select name="lock_mode" value={form.lock_mode} onChange={(e) => change('lock_mode', e.target.value as LockMode)}>
                <option value="exclusive">exclusive: one lock at a time</option>
                <option value="shared">shared: competing consumers</option>
              </select>
            </label>
            <NumberField
              name="max_deliveries"
              label="max_deliveries (1–1,000)"
              max={1000}
              placeholder="no limit"
              value={form.max_deliveries}
              onChange={(value) => change('max_deliveries', value)}
              invalid={invalid('max_deliveries')}
            />
            <label className="field">
              <span>dead_letter_queue</span>
              <input
                className="mono"
                name="dead_letter_queue"
                value={form.dead_letter_queue}
                placeholder="none"
                spellCheck={false}
                onChange={(e) => change('dead_letter_queue', e.target.value)}
                aria-invalid={invalid('dead_letter_queue')}
              />
            </label>
            <NumberField
              name="retry_delay_seconds"
              label="retry_delay_seconds (0–900)"
              min={0}
              max={900}
              placeholder="0"
              value={form.retry_delay_seconds}
              onChange={(value) => change('retry_delay_seconds', value)}
              invalid={invalid('retry_delay_seconds')}
            />
            <label className="field">
              <span>retry_backoff</span>
              <select name="retry_backoff" value={form.retry_backoff} onChange={(e) => change('retry_backoff', e.target.value as RetryBackoff)}>
                <option value="exponential">exponential: doubles per delivery</option>
                <option value="fixed">fixed: the same every time</option>
              </select>
            </label>
            <NumberField
              name="retry_delay_max_seconds"
              label="retry_delay_max_seconds (1–900)"
              max={900}
              placeholder="900"
              value={form.retry_delay_max_seconds}
              onChange={(value) => change('retry_delay_max_seconds', value)}
              invalid={invalid('retry_delay_max_seconds')}
            />
            <NumberField
              name="max_in_flight"
              label="max_in_flight (1–100,000)"
              max={100000}
              placeholder="no limit"
              value={form.max_in_flight}
              onChange={(value) => change('max_in_flight', value)}
              invalid={invalid('max_in_flight')}
            />
            <NumberField
              name="max_pops_per_second"
              label="max_pops_per_second (0.1–100,000)"
              min={0.1}
              step={0.1}
              max={100000}
              placeholder="no limit"
              value={form.max_pops_per_second}
              onChange={(value) => change('max_pops_per_second', value)}
              invalid={invalid('max_pops_per_second')}
            />
          </div>
          <p className="hint">
            The segment layout changes only while the queue is empty and unlocked; the lock mode only while no lock lives. Items whose lock expires or is
            released after max_deliveries deliveries go to the dead-letter queue; the others wait out the retry delay, then go back to the front. The delivery
            limits bound the items held by locks and the items handed out per second, for all processes together.
          </p>
          {problem && (
            <p className="field-problem" role="alert" data-testid="settings-problem">
              {problem.text}
            </p>
          )}
          <div className="form-row">
            <button type="submit" className="btn btn-primary" disabled={busy || !allowed.allowed} title={whyNot(allowed)}>
              Save settings
            </button>
            <button type="button" className="btn" disabled={busy} onClick={() => setForm(null)}>
              Cancel
            </button>
          </div>
          {error && <ErrorNote error={error} onDismiss={() => setError(null)} />}
        </form>
      )}
      <ScopeNote permission={allowed} />
    </section>
  );
}

function Setting({ name, value, hint }: { name: string; value: string; hint?: string }) {
  return (
    <div className="setting" data-setting={name}>
      <dt>{name}</dt>
      <dd>
        <span className="setting-value">{value}</span>
        {hint && <span className="muted small"> · {hint}</span>}
      </dd>
    </div>
  );
}
