import { call } from '../api';
import { count, oneDecimal } from '../format';
import { useSampledPoll } from '../hooks';
import { levels, perSecond, SAMPLE_CAPACITY, SAMPLE_INTERVAL_MS, throughput, type Sample, type Throughput } from '../samples';
import { useApi } from '../session';
import { Sparkline } from './sparkline';

const WINDOW_MS = SAMPLE_CAPACITY * SAMPLE_INTERVAL_MS;
const rateText = (v: number) => oneDecimal(v);
const signedRateText = (v: number) => `${v > 0 ? '+' : ''}${oneDecimal(v)}`;

/** Samples /metrics every two seconds while shown: the service's items pushed and popped, queued items and locks. */
function useThroughput() {
  const api = useApi();
  return useSampledPoll(
    async (signal) => throughput(await call(api.GET('/metrics', { parseAs: 'text', signal }))),
    (t: Throughput) => t,
    SAMPLE_CAPACITY,
    SAMPLE_INTERVAL_MS,
    'throughput',
  );
}

function refusal(error: { status: number } | undefined): string | undefined {
  if (!error) return undefined;
  if (error.status === 401) return 'The charts need a key with the read scope.';
  if (error.status === 403) return 'The charts need the read scope.';
  return undefined;
}

/**
 * The service over the last five minutes, from /metrics every two seconds: items pushed and
 * popped per second, items waiting in all queues and locks held (those two are counted in the
 * database at most every 10 s, so they move in steps).
 */
export function ServiceCharts() {
  const poll = useThroughput();
  const s = poll.samples;
  const refused = refusal(poll.error);
  return (
    <section className="card" aria-label="Service activity" data-testid="service-charts">
      <div className="card-head">
        <h3>All queues, last 5 minutes</h3>
        {poll.error && <span className="muted">{refused ?? `/metrics: ${poll.error.message}`}</span>}
      </div>
      <div className="sparks">
        <Sparkline label="pushes/s" series="pushes" points={perSecond(s, (t) => t.pushed)} windowMs={WINDOW_MS} format={rateText} />
        <Sparkline label="pops/s" series="pops" points={perSecond(s, (t) => t.popped)} windowMs={WINDOW_MS} format={rateText} />
        <Sparkline
          label="queued items"
          series="depth"
          points={levels(s, (t) => t.queued)}
          windowMs={WINDOW_MS}
          format={count}
          title="Items waiting in all queues (pushpop_queued_items, counted at most every 10 s)"
        />
        <Sparkline
          label="locks held"
          series="in-flight"
          points={levels(s, (t) => t.liveLocks)}
          windowMs={WINDOW_MS}
          format={count}
          title="Acknowledgement locks not yet acknowledged, released or expired (pushpop_live_locks, counted at most every 10 s)"
        />
      </div>
    </section>
  );
}

/** What the queue's charts read from each `GET /queue/{id}`. */
export interface QueueLevels {
  waiting: number;
  held: number;
}

/**
 * One queue over the last five minutes: its waiting items and the items its locks hold (from
 * the panel's own polls of `GET /queue/{id}`), their change per second (below 0: the queue
 * drains), and the service's pushes and pops per second for comparison (/metrics has no queue
 * ids, by design).
 */
export function QueueCharts({ samples }: { samples: readonly Sample<QueueLevels>[] }) {
  const service = useThroughput();
  const s = service.samples;
  return (
    <section className="card" aria-label="Queue activity" data-testid="queue-charts">
      <div className="card-head">
        <h3>Last 5 minutes</h3>
      </div>
      <div className="sparks">
        <Sparkline label="waiting" series="depth" points={levels(samples, (q) => q.waiting)} windowMs={WINDOW_MS} format={count} />
        <Sparkline label="held by locks" series="in-flight" points={levels(samples, (q) => q.held)} windowMs={WINDOW_MS} format={count} />
        <Sparkline
          label="change/s"
          series="change"
          points={perSecond(samples, (q) => q.waiting + q.held, true)}
          windowMs={WINDOW_MS}
          format={signedRateText}
          title="Waiting and held items together, change per second: below 0 the queue drains"
        />
        <Sparkline
          label="pushes/s, all queues"
          series="pushes"
          points={perSecond(s, (t) => t.pushed)}
          windowMs={WINDOW_MS}
          format={rateText}
          title={refusal(service.error) ?? 'Items pushed per second to all queues (/metrics)'}
        />
        <Sparkline
          label="pops/s, all queues"
          series="pops"
          points={perSecond(s, (t) => t.popped)}
          windowMs={WINDOW_MS}
          format={rateText}
          title={refusal(service.error) ?? 'Items popped per second from all queues (/metrics)'}
        />
      </div>
    </section>
  );
}
