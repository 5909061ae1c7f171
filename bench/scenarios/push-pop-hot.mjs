// The default scenarios, run on every target alike: `push` and `pop` over many queues, and a
// `hot` queue taking pushes and pops at once. Each checks afterwards that the counts add up.

import { CONFIG } from '../common/config.mjs';
import { fmtNum } from '../common/format.mjs';
import { HOT_QUEUE, QUEUE_IDS, randomQueue } from '../common/items.mjs';
import { problems } from '../common/results.mjs';
import { progress } from '../common/util.mjs';
import { cannon, newCounters, popRequest, pushRequest } from '../load/cannon.mjs';
import { addItems, queueCounts, sumCounts } from '../targets/counts.mjs';
import { C, measured, record, runIssues, S, settle, W, warmUp } from './record.mjs';

export async function scenarioPush(target, roundNo) {
  progress(`  ${target.name} · push: ${W()} s warm-up + ${S()} s measured, ${C()} connections, a random queue of ${CONFIG.queues} per request ...`);
  const makeRequests = (counters) => [pushRequest(randomQueue, counters)];
  await warmUp(target, 'push', makeRequests, C());
  await settle();
  const before = sumCounts(await queueCounts(target, QUEUE_IDS));
  const counters = newCounters();
  const { r, cpu } = await measured(target, { connections: C(), seconds: S(), requests: makeRequests(counters) });
  await settle();
  const stored = sumCounts(await queueCounts(target, QUEUE_IDS)) - before;
  // a request cut off when the run stopped may have committed without its response being counted
  const ok = stored >= counters.pushed && stored <= counters.pushed + C();
  const row = record(target, 'push', roundNo, r, cpu, {
    check: { ok, detail: `${stored} items stored in the ${CONFIG.queues} queues for ${counters.pushed} 200 pushes` },
  });
  target.pushRate = Math.max(target.pushRate ?? 0, row.req_per_s);
}

export async function scenarioPop(target, roundNo) {
  // Enough per queue that none runs dry: pops are assumed up to popRateFactor x as fast as the
  // target's pushes measured so far, a queue is drawn at random per request (5 standard
  // deviations of headroom), at least minPerQueue, at most BENCH_MAX_PREFILL over all queues.
  const rate = CONFIG.popRateFactor * (target.pushRate ?? CONFIG.defaultPushRate);
  const mean = (rate * (W() + S())) / CONFIG.queues;
  const cap = Math.max(1, Math.floor(CONFIG.maxPrefill / CONFIG.queues));
  const level = Math.min(cap, Math.max(CONFIG.minPerQueue, Math.ceil(mean + 5 * Math.sqrt(mean) + 5)));
  const now = await queueCounts(target, QUEUE_IDS);
  const plan = new Map(QUEUE_IDS.map((id) => [id, Math.max(0, level - now.get(id))]));
  const adding = [...plan.values()].reduce((a, b) => a + b, 0);
  progress(
    `  ${target.name} · pop: pre-filling to ${level} items per queue (${adding.toLocaleString('en-US')} items; ${target.kind === 'pushpop' ? 'batch pushes' : 'single pushes'}, not measured) ...`,
  );
  const fill = await addItems(target, plan, { label: 'pop pre-fill' });
  if (fill.items > 0) progress(`    pre-filled in ${fill.seconds} s (${fmtNum(fill.items_per_s)} items/s)`);
  if (level === cap && mean + 5 * Math.sqrt(mean) + 5 > cap)
    progress(`    note: the pre-fill is capped by BENCH_MAX_PREFILL=${CONFIG.maxPrefill}; raise it if the queues run dry`);
  progress(`  ${target.name} · pop depth 1: ${W()} s warm-up + ${S()} s measured, ${C()} connections, a random queue of ${CONFIG.queues} per request ...`);
  const warm = newCounters();
  if (W() > 0) {
    const r = await cannon({ url: target.url, connections: C(), seconds: W(), requests: [popRequest(randomQueue, warm)] });
    for (const b of runIssues(r)) problems.push(`${target.name} pop (warm-up): ${b}`);
    await settle();
  }
  const beforeCounts = await queueCounts(target, QUEUE_IDS);
  const counters = newCounters();
  const { r, cpu } = await measured(target, { connections: C(), seconds: S(), requests: [popRequest(randomQueue, counters)] });
  await settle();
  const afterCounts = await queueCounts(target, QUEUE_IDS);
  const removed = sumCounts(beforeCounts) - sumCounts(afterCounts);
  const emptied = QUEUE_IDS.filter((id) => afterCounts.get(id) === 0).length;
  const empty = counters.emptyPops + warm.emptyPops;
  const ranDry = empty > 0 || emptied > 0;
  const ok = counters.unparsable === 0 && removed >= counters.popped && removed <= counters.popped + C();
  record(target, 'pop', roundNo, r, cpu, {
    prefill: { per_queue: level, added: fill.items, seconds: fill.seconds },
    popped_items: counters.popped,
    empty_pops: counters.emptyPops,
    empty_pops_warmup: warm.emptyPops,
    queues_emptied: emptied,
    items_left: sumCounts(afterCounts),
    ran_dry: ranDry,
    ran_dry_detail: ranDry ? `${empty} empty pop(s), ${emptied} queue(s) empty at the end; raise BENCH_MAX_PREFILL` : undefined,
    check: { ok, detail: `${removed} items left the queues, ${counters.popped} received in 200 pops, ${counters.unparsable} unparsable bodies` },
  });
}

export async function scenarioHot(target, roundNo) {
  const now = (await queueCounts(target, [HOT_QUEUE])).get(HOT_QUEUE);
  if (now < CONFIG.hotBacklog) {
    progress(`  ${target.name} · hot: topping ${HOT_QUEUE} up to ${CONFIG.hotBacklog} items (not measured) ...`);
    await addItems(target, new Map([[HOT_QUEUE, CONFIG.hotBacklog - now]]), { label: 'hot pre-fill' });
  }
  progress(`  ${target.name} · hot: ${W()} s warm-up + ${S()} s measured, ${C()} connections alternating push and pop on one queue ...`);
  const makeRequests = (counters) => [pushRequest(() => HOT_QUEUE, counters), popRequest(() => HOT_QUEUE, counters)];
  await warmUp(target, 'hot', makeRequests, C());
  await settle();
  const before = (await queueCounts(target, [HOT_QUEUE])).get(HOT_QUEUE);
  const counters = newCounters();
  const { r, cpu } = await measured(target, { connections: C(), seconds: S(), requests: makeRequests(counters) });
  await settle();
  const after = (await queueCounts(target, [HOT_QUEUE])).get(HOT_QUEUE);
  const expected = before + counters.pushed - counters.popped;
  const ok = counters.unparsable === 0 && Math.abs(after - expected) <= C();
  record(target, 'hot', roundNo, r, cpu, {
    backlog_before: before,
    backlog_after: after,
    pushed_items: counters.pushed,
    popped_items: counters.popped,
    empty_pops: counters.emptyPops,
    check: { ok, detail: `${before} + ${counters.pushed} pushed - ${counters.popped} popped = ${expected}, queue holds ${after}` },
  });
}
