// The items a target holds, counted the target's own way, and items added to its queues
// outside the measured windows (pre-fills, fills, top-ups).

import { performance } from 'node:perf_hooks';
import { CONFIG, TABLE_PEERS } from '../common/config.mjs';
import { httpRequest } from '../common/http.mjs';
import { itemJson, pushBody, randomPriority } from '../common/items.mjs';
import { forEachLimit, progress, round } from '../common/util.mjs';
import { bullName, waitingKeys } from '../peers/bullmq-names.mjs';
import { TABLE as PEER_TABLE } from '../peers/queue-table.mjs';

export const bossName = (queueId) => (/[\w-]/.test(queueId) ? queueId : `q/${queueId}`); // bench/peers/pgboss.mjs

/** Items waiting per queue id (pushpop: GET /queue/{id}; the peers: a count on their database). */
export async function queueCounts(target, ids) {
  const counts = new Map(ids.map((id) => [id, 0]));
  if (target.kind === 'pushpop') {
    await forEachLimit(ids, 16, async (id) => {
      const { status, body } = await httpRequest(target.url, 'GET', `/queue/${encodeURIComponent(id)}`);
      if (status === 404) return;
      if (status !== 200 || typeof body?.count !== 'number') throw new Error(`GET /queue/${id}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
      counts.set(id, body.count + (body.lock?.item_count ?? 0) + (body.locks?.item_count ?? 0));
    });
    return counts;
  }
  if (target.redis) {
    // BullMQ: the jobs waiting without a priority (a list) and with one (a sorted set)
    const pipeline = target.redis.client.pipeline();
    for (const id of ids) {
      const keys = waitingKeys(id);
      pipeline.llen(keys.wait);
      pipeline.zcard(keys.prioritized);
    }
    const results = (await pipeline.exec()) ?? [];
    ids.forEach((id, i) => {
      const [[e1, waiting], [e2, prioritized]] = [results[2 * i] ?? [new Error('no reply')], results[2 * i + 1] ?? [new Error('no reply')]];
      if (e1 || e2) throw e1 ?? e2;
      counts.set(id, Number(waiting) + Number(prioritized));
    });
    return counts;
  }
  if (target.name === 'bullmq-postgres') {
    // BullMQ's PostgreSQL backend: its jobs in the state `waiting` (with a priority or not)
    const names = new Map(ids.map((id) => [bullName(id), id]));
    const { rows } = await target.pool.query(`SELECT queue, count(*)::int AS n FROM bullmq.job WHERE queue = ANY($1) AND state = 'waiting' GROUP BY queue`, [
      [...names.keys()],
    ]);
    for (const row of rows) counts.set(names.get(row.queue), row.n);
    return counts;
  }
  if (TABLE_PEERS.includes(target.name)) {
    const { rows } = await target.pool.query(`SELECT queue_id AS id, count(*)::int AS n FROM ${PEER_TABLE} WHERE queue_id = ANY($1) GROUP BY queue_id`, [ids]);
    for (const row of rows) counts.set(row.id, row.n);
    return counts;
  }
  const names = new Map(ids.map((id) => [bossName(id), id]));
  let rows = [];
  try {
    ({ rows } = await target.pool.query(`SELECT name, count(*)::int AS n FROM pgboss.job WHERE name = ANY($1) AND state < 'active' GROUP BY name`, [
      [...names.keys()],
    ]));
  } catch (error) {
    if (error?.code !== '42P01') throw error; // no pgboss.job yet: nothing pushed
  }
  for (const row of rows) counts.set(names.get(row.name), row.n);
  return counts;
}

export const sumCounts = (counts) => [...counts.values()].reduce((a, b) => a + b, 0);

/**
 * Adds plan.get(queue) items to each queue, not measured: pushpop by batch pushes of up to
 * 1000, the peers by single pushes through their push route. Verifies the counts afterwards.
 */
export async function addItems(target, plan, { priority = null, label = 'pre-fill', onTick = null } = {}) {
  const total = [...plan.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return { items: 0, seconds: 0 };
  const ids = [...plan.keys()];
  const before = await queueCounts(target, ids);
  const started = performance.now();
  const deadline = Date.now() + CONFIG.prefillTimeoutSeconds * 1000;
  const checkDeadline = () => {
    if (Date.now() > deadline) throw new Error(`${label} took longer than BENCH_PREFILL_TIMEOUT=${CONFIG.prefillTimeoutSeconds} s`);
    if (!target.proc.alive()) throw new Error(`${target.name} exited during the ${label}`);
  };
  const prio = () => (priority === null ? randomPriority() : priority);
  let done = 0;
  let lastTick = 0;
  const tick = () => {
    if (onTick) onTick();
    if (performance.now() - lastTick > 10_000) {
      lastTick = performance.now();
      if (done > 0) progress(`    ${label}: ${done.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} items`);
    }
  };
  lastTick = performance.now();
  if (target.kind === 'pushpop') {
    const batches = [];
    for (const [id, n] of plan) for (let off = 0; off < n; off += CONFIG.batchSize) batches.push([id, Math.min(CONFIG.batchSize, n - off)]);
    // one worker per queue at a time keeps batches to one queue in order; queues run in parallel
    const byQueue = new Map();
    for (const b of batches) byQueue.set(b[0], [...(byQueue.get(b[0]) ?? []), b]);
    await forEachLimit([...byQueue.values()], 8, async (queueBatches) => {
      for (const [id, n] of queueBatches) {
        checkDeadline();
        const entries = [];
        for (let i = 0; i < n; i++) entries.push(`{"item":${itemJson()},"priority":${prio()}}`);
        const { status, body } = await httpRequest(
          target.url,
          'POST',
          `/queue/${encodeURIComponent(id)}/push/batch`,
          `{"items":[${entries.join(',')}]}`,
          120_000,
        );
        if (status !== 200 || body?.count !== n) throw new Error(`batch push of ${n} to ${id}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
        done += n;
        tick();
      }
    });
  } else {
    // round-robin over the queues, so that a slow pre-fill spreads evenly
    const pushes = [];
    const remaining = new Map([...plan].filter(([, n]) => n > 0));
    for (let guard = 0; remaining.size > 0 && guard < total + 1; guard++) {
      for (const [id, n] of remaining) {
        pushes.push(id);
        if (n <= 1) remaining.delete(id);
        else remaining.set(id, n - 1);
      }
    }
    await forEachLimit(pushes, Math.min(32, CONFIG.connections), async (id) => {
      if ((done & 255) === 0) checkDeadline();
      const { status, body } = await httpRequest(target.url, 'POST', `/queue/${encodeURIComponent(id)}/push`, pushBody(prio()));
      if (status !== 200) throw new Error(`push to ${id}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
      done += 1;
      if ((done & 1023) === 0) tick();
    });
  }
  const seconds = (performance.now() - started) / 1000;
  const after = await queueCounts(target, ids);
  const wrong = ids.filter((id) => after.get(id) !== before.get(id) + plan.get(id));
  if (wrong.length > 0) {
    const id = wrong[0];
    throw new Error(
      `${label}: ${wrong.length} queue(s) do not hold what was pushed (e.g. ${id}: ${after.get(id)} items, expected ${before.get(id)} + ${plan.get(id)})`,
    );
  }
  return { items: total, seconds: round(seconds, 2), items_per_s: Math.round(total / seconds) };
}
