import type { QueueInfo } from '@pushpop/api-client';
import { call } from '../api';
import { count } from '../format';
import { usePoll } from '../hooks';
import { segmentKey } from '../segments';
import { useApi } from '../session';
import { ErrorNote } from './error-note';
import type { SegmentRef } from './segment-chain';

const SHOWN = 10;

interface Props {
  info: QueueInfo;
  priorities: string[];
  selected: SegmentRef | undefined;
  onSelect: (ref: SegmentRef) => void;
  refreshKey: number;
}

/** Resolves the segment to list: the one clicked while it still exists, else the head of the first priority. */
export function effectiveSegment(info: QueueInfo, priorities: string[], selected: SegmentRef | undefined): SegmentRef | undefined {
  const priority = selected && info.priorities[selected.priority] ? selected.priority : priorities[0];
  if (priority === undefined) return undefined;
  const p = info.priorities[priority];
  const wanted = selected?.priority === priority ? selected.segment : p.head_segment;
  const segment = wanted >= p.head_segment && wanted <= p.tail_segment ? wanted : p.head_segment;
  const offloaded =
    p.head_offloaded_segment != null && p.tail_offloaded_segment != null && segment >= p.head_offloaded_segment && segment <= p.tail_offloaded_segment;
  return { priority, segment, offloaded };
}

/** The first items of one segment (the head by default), from `GET /queue/{id}/state/{key}`. */
export function SegmentItems({ info, priorities, selected, onSelect, refreshKey }: Props) {
  const api = useApi();
  const ref = effectiveSegment(info, priorities, selected);
  const key = ref ? segmentKey(info.queue_id, ref.priority, ref.segment, ref.offloaded) : '';
  const p = ref ? info.priorities[ref.priority] : undefined;
  const items = usePoll(
    async (signal) => {
      if (!key) return { key, items: [] as unknown[] };
      const value = await call(api.GET('/queue/{queue_id}/state/{key}', { params: { path: { queue_id: info.queue_id, key } }, signal }));
      const items: unknown[] = Array.isArray(value) ? value : [value];
      return { key, items };
    },
    5000,
    `${key}\u0000${p?.head_segment_count ?? ''}\u0000${refreshKey}`,
    true,
  );
  if (!ref || !p) return null;
  const shown = items.data && items.data.key === key ? items.data.items : undefined;
  const where = ref.segment === p.head_segment ? 'head' : ref.segment === p.tail_segment ? 'tail' : ref.offloaded ? 'offloaded' : 'in state';

  return (
    <section className="card" data-testid="segment-items" aria-label="Items">
      <div className="card-head">
        <h3>Items</h3>
        <label className="field field-inline">
          <span>Priority</span>
          <select
            value={ref.priority}
            onChange={(e) => onSelect({ priority: e.target.value, segment: info.priorities[e.target.value].head_segment, offloaded: false })}
          >
            {priorities.map((priority) => (
              <option key={priority} value={priority}>
                {priority}
              </option>
            ))}
          </select>
        </label>
      </div>
      <p className="muted small">
        Segment #{ref.segment} ({where}) of priority {ref.priority}
        {shown ? ` · first ${Math.min(SHOWN, shown.length)} of ${count(shown.length)}` : ''} · <code>{key}</code>
      </p>
      {items.error && <ErrorNote error={items.error} />}
      {shown && (
        <ol className="items" start={0} data-testid="items">
          {shown.slice(0, SHOWN).map((item, i) => (
            <li key={i}>
              <pre>{JSON.stringify(item, null, 2)}</pre>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
