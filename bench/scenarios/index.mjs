// The scenarios by name, which targets run each, and the unmeasured set-up before the first.

import { performance } from 'node:perf_hooks';
import { CONFIG, PUSHPOP_ONLY_SCENARIOS } from '../common/config.mjs';
import { httpRequest } from '../common/http.mjs';
import { HOT_QUEUE, pushBody, QUEUE_IDS } from '../common/items.mjs';
import { forEachLimit, progress } from '../common/util.mjs';
import { addItems, queueCounts } from '../targets/counts.mjs';
import { scenarioAckPop } from './ackpop.mjs';
import { CLIENT_TARGETS, scenarioClients } from './clients.mjs';
import { scenarioDelayed, scenarioDepth } from './depth-delayed.mjs';
import { scenarioFair } from './fair.mjs';
import { scenarioIdle } from './idle.mjs';
import { scenarioLongPoll } from './longpoll.mjs';
import { scenarioHot, scenarioPop, scenarioPush } from './push-pop-hot.mjs';
import { scenarioSqlEnqueue } from './sqlenq.mjs';

export const SCENARIO_FNS = {
  push: scenarioPush,
  pop: scenarioPop,
  hot: scenarioHot,
  depth: scenarioDepth,
  delayed: scenarioDelayed,
  longpoll: scenarioLongPoll,
  ackpop: scenarioAckPop,
  idle: scenarioIdle,
  fair: scenarioFair,
  clients: scenarioClients,
  sqlenq: scenarioSqlEnqueue,
};

/** The targets a scenario runs on, when not every target (by target name). */
const RUNS_ON = {
  ...Object.fromEntries(PUSHPOP_ONLY_SCENARIOS.map((s) => [s, (name) => name.startsWith('pushpop-')])),
  clients: (name) => CLIENT_TARGETS.includes(name),
};

/** Whether `scenario` runs on `target`. */
export const runsOn = (scenario, target) => RUNS_ON[scenario]?.(target.name) ?? true;

/** Whether a target of this name takes part in any selected scenario (a peer in pushpop-only scenarios does not). */
export const targetNeeded = (name) => CONFIG.scenarios.some((sc) => RUNS_ON[sc]?.(name) ?? true);

/** The rows a scenario records in the main table, in table order (some record two; some none: they have tables of their own). */
export const ROWS_OF = {
  depth: ['depth-shallow', 'depth-deep'],
  delayed: ['delayed-none', 'delayed-many'],
  ackpop: ['ackpop-shared', 'ackpop-exclusive'],
  idle: [],
  fair: [],
  clients: [],
  sqlenq: [],
};

/** Unmeasured: one push to every queue the scenarios use, so every target has created its queues (pg-boss: one partition each). */
export async function setUpQueues(target) {
  const ids = [...(CONFIG.scenarios.some((s) => s === 'push' || s === 'pop') ? QUEUE_IDS : []), ...(CONFIG.scenarios.includes('hot') ? [HOT_QUEUE] : [])];
  if (ids.length === 0) return;
  progress(`  ${target.name}: one push to each of the ${ids.length} queues (creates them; not measured) ...`);
  const t0 = performance.now();
  const counts = await queueCounts(target, ids);
  const plan = new Map(ids.filter((id) => counts.get(id) === 0).map((id) => [id, 1]));
  if (target.kind === 'pushpop') {
    // through the single push route here too, like the peers
    const deadline = Date.now() + CONFIG.prefillTimeoutSeconds * 1000;
    await forEachLimit([...plan.keys()], 16, async (id) => {
      if (Date.now() > deadline) throw new Error(`creating the queues took longer than BENCH_PREFILL_TIMEOUT=${CONFIG.prefillTimeoutSeconds} s`);
      const { status, body } = await httpRequest(target.url, 'POST', `/queue/${encodeURIComponent(id)}/push`, pushBody());
      if (status !== 200) throw new Error(`push to ${id}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
    });
  } else {
    await addItems(target, plan, { label: 'queue set-up' });
  }
  progress(`    done in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}
