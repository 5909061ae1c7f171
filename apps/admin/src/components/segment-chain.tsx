import { count, plural } from '../format';
import { KIND_LABEL, segmentChain, type PriorityInfo, type QueueConfig, type SegmentBlock } from '../segments';
import { ArchiveIcon } from './icons';

export interface SegmentRef {
  priority: string;
  segment: number;
  offloaded: boolean;
}

interface Props {
  priority: string;
  info: PriorityInfo;
  config: QueueConfig;
  selected: SegmentRef | undefined;
  onSelect: (ref: SegmentRef) => void;
}

function blockText(block: SegmentBlock): string {
  const range = `segments ${block.first}–${block.last}`;
  if (block.kind === 'offloaded') return `${range} offloaded (${plural(block.items, 'item')})`;
  if (block.kind === 'buffer') return `${range} buffer (${plural(block.items, 'item')})`;
  return `${range} in state (${plural(block.items, 'item')})`;
}

/**
 * One priority's segment chain, head to tail: each block is a segment (number, items, a fill
 * bar against `segment_size`) or a collapsed run; blue blocks are in the actor's state, hatched
 * grey ones in the offload store. A single segment can be clicked to list its items.
 */
export function SegmentChain({ priority, info, config, selected, onSelect }: Props) {
  const chain = segmentChain(info, config);
  return (
    <div className="priority" data-testid="priority" data-priority={priority}>
      <div className="priority-head">
        <span className="priority-label">priority {priority}</span>
        <span className="muted">
          {plural(info.count, 'item')} · {plural(chain.segments, 'segment')} ({info.head_segment}–{info.tail_segment})
          {chain.offloaded > 0 && ` · ${count(chain.offloaded)} offloaded`}
        </span>
      </div>
      <ol className="chain" aria-label={`Segments of priority ${priority}, head to tail`}>
        {chain.blocks.map((block) => {
          const offloaded = block.kind === 'offloaded';
          const isSelected = !block.collapsed && selected?.priority === priority && selected.segment === block.first;
          const fill = Math.min(1, block.items / config.segment_size);
          const common = {
            'data-testid': 'segment',
            'data-kind': block.kind,
            'data-state': offloaded ? 'offloaded' : 'state',
            'data-first': block.first,
            'data-last': block.last,
            'data-items': block.items,
          };
          if (block.collapsed) {
            return (
              <li key={`${block.kind}-${block.first}`} className={`seg seg-run seg-${block.kind}`} {...common} title={blockText(block)}>
                {offloaded && <ArchiveIcon />}
                <span className="seg-run-text">{blockText(block)}</span>
              </li>
            );
          }
          return (
            <li key={`${block.kind}-${block.first}`} className={`seg seg-${block.kind}${isSelected ? ' seg-selected' : ''}`} {...common}>
              <button
                type="button"
                onClick={() => onSelect({ priority, segment: block.first, offloaded })}
                title={`Segment ${block.first}: ${plural(block.items, 'item')}, ${KIND_LABEL[block.kind]}. Click to list its items.`}
                aria-pressed={isSelected}
              >
                <span className="seg-tag">{KIND_LABEL[block.kind]}</span>
                <span className="seg-num">#{block.first}</span>
                <span className="seg-count">{count(block.items)}</span>
                <span className="seg-fill" aria-hidden="true">
                  <span style={{ width: `${fill * 100}%` }} />
                </span>
              </button>
            </li>
          );
        })}
      </ol>
    </div>
  );
}

export function SegmentLegend({ config }: { config: QueueConfig }) {
  return (
    <div className="legend">
      <span>
        <i className="swatch swatch-state" /> in state
      </span>
      <span>
        <i className="swatch swatch-offloaded" /> offloaded
      </span>
      <span className="muted">
        {config.segment_size} items per segment · {plural(config.buffer_segments, 'buffer segment')} after the head
      </span>
    </div>
  );
}
