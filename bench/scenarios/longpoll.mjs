// pushpop only: idle consumers, then one push each (`longpoll`).

import http from 'node:http';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { CONFIG } from '../common/config.mjs';
import { fmtMs, fmtNum } from '../common/format.mjs';
import { httpRequest, metricsOf } from '../common/http.mjs';
import { problems, runRows, runState } from '../common/results.mjs';
import { forEachLimit, progress, round, sleep, summarize } from '../common/util.mjs';
import { pushpopDatabaseUrl } from '../targets/postgres.mjs';
import { CLK_TCK, rssKb } from '../targets/proc.mjs';
import {
  closeIdleServiceConnections,
  cpuTicks,
  idleWindow,
  longPollRequest,
  noPollsWaiting,
  openPolls,
  pollsWaiting,
  secondProcess,
  warmLongPolls,
} from './long-polls.mjs';
import { failed } from './record.mjs';

/**
 * pushpop only. `BENCH_LONGPOLL_POLLS` consumers each long-poll (`wait_seconds=20`) a queue of
 * their own that was never pushed to; once all of them wait, nothing happens for
 * `BENCH_LONGPOLL_IDLE_SECONDS` while the database's transactions (pg_stat_database), the
 * service's CPU and PostgreSQL's CPU are measured; then every queue gets one push,
 * `BENCH_LONGPOLL_IN_FLIGHT` at a time, in the order the polls started, through the same process
 * or through a second one on the same database; every consumer must receive its item; the
 * latency is (poll answered − that queue's push answered). A consumer whose poll ends empty
 * polls again (counted), as a real one would.
 */
export async function scenarioLongPoll(target, roundNo) {
  await warmLongPolls(target, CONFIG.longPolls);
  for (const processes of CONFIG.longPollProcesses) {
    const name = `longpoll-${processes}p`;
    try {
      await longPollRun(target, roundNo, processes, name);
    } catch (error) {
      failed(target, name, roundNo, error);
    }
  }
}

async function longPollRun(target, roundNo, processes, name) {
  const n = CONFIG.longPolls;
  const pusher = processes === 2 ? (await secondProcess(target)).proc : target.proc;
  const ids = Array.from({ length: n }, (_, i) => `lp-${roundNo}-${processes}-${i}-${Date.now().toString(36)}`);
  const pollAgent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: n + 16 });
  const monitor = new pg.Client({ connectionString: pushpopDatabaseUrl(target), application_name: 'pushpop-bench-monitor' });
  await monitor.connect();
  // consumers give up polling again after this (set once every push answered, or when the run fails)
  let giveUpAt = Infinity;
  try {
    progress(
      `  ${target.name} · long polls, ${processes === 2 ? 'pushes through a second process' : 'one process'}: opening ${fmtNum(n)} long polls on empty queues ...`,
    );
    // polls of an earlier run that failed end when their connections close; give them time
    await noPollsWaiting(target.url);
    const rssBefore = rssKb(target.proc.pid);
    const wakeBefore = await metricsOf(target.url);
    const opened = performance.now();

    const answeredAt = new Array(n).fill(null);
    // whether a consumer's wait ran out (an empty answer) before it received its item
    const repolledBefore = new Array(n).fill(false);
    const errors = [];
    let repolls = 0;
    let repollsInWindow = 0;
    let answeredInWindow = 0;
    let inWindow = false;
    const consume = async (i, first) => {
      let res = await first;
      for (;;) {
        if (res.status === 200 && res.body?.count > 0) {
          answeredAt[i] = res.at;
          if (inWindow) answeredInWindow += 1;
          return;
        }
        if (res.status !== 200) errors.push(`${ids[i]}: ${res.status} ${res.error ?? JSON.stringify(res.body).slice(0, 200)}`);
        if (performance.now() > giveUpAt || runState.interrupted || errors.length > 100) return;
        repolls += 1;
        repolledBefore[i] = true;
        if (inWindow) repollsInWindow += 1;
        if (res.status !== 200) await sleep(100);
        res = await longPollRequest(target.url, ids[i], pollAgent);
      }
    };
    const { consumers, firstSentAt, waitingAtStart } = await openPolls({ url: target.url, ids, pollAgent, errors, consume });
    const openSeconds = (performance.now() - opened) / 1000;
    const rssWaiting = rssKb(target.proc.pid);
    const openedAt = performance.now();
    // The window ends before the first poll's 20 s are up (its answer and the poll after it would be counted).
    const windowMs = Math.min(CONFIG.longPollIdleSeconds * 1000, firstSentAt + 20_000 - 1_500 - 1_500 - performance.now());
    if (windowMs < 1000)
      throw new Error(
        `opening ${fmtNum(n)} long polls took ${openSeconds.toFixed(1)} s: no time is left for an idle window before the first poll's 20 s are up (lower BENCH_LONGPOLL_POLLS)`,
      );
    progress(
      `    ${fmtNum(waitingAtStart)}${waitingAtStart < n ? ` (of ${fmtNum(n)} sent; the others in a turn)` : ''} polls waiting after ${openSeconds.toFixed(1)} s; idle for ${(windowMs / 1000).toFixed(1)} s (measured)${windowMs < CONFIG.longPollIdleSeconds * 1000 ? `, shortened: the first poll's 20 s end then` : ''} ...`,
    );

    await sleep(Math.max(0, 1000 - (performance.now() - openedAt)));
    const closedConnections = await closeIdleServiceConnections(monitor, processes === 2 ? [target.proc, pusher] : [target.proc]);

    const sample = () => cpuTicks(target, processes === 2 ? pusher : null);
    inWindow = true;
    const window = await idleWindow(monitor, sample, windowMs);
    inWindow = false;
    const { cpu0, cpu1 } = window;
    const windowSeconds = window.seconds;
    const waitingAfterIdle = await pollsWaiting(target.url);
    const pct = (a, b) => (a === null || b === null ? null : round(((b - a) / CLK_TCK / windowSeconds) * 100, 1));
    const idle = {
      seconds: round(windowSeconds, 2),
      transactions: window.transactions,
      transactions_per_s: round(window.transactions / windowSeconds, 1),
      pool_connections_closed_before: closedConnections,
      server_cpu_pct: pct(cpu0.server, cpu1.server),
      pusher_cpu_pct: pct(cpu0.pusher, cpu1.pusher),
      postgres_cpu_pct: pct(cpu0.postgres, cpu1.postgres),
      polls_answered: answeredInWindow,
      repolls: repollsInWindow,
      waiting_after: waitingAfterIdle,
    };
    progress(
      `    idle: ${idle.transactions_per_s} transactions/s, service CPU ${idle.server_cpu_pct}% of a core, PostgreSQL CPU ${idle.postgres_cpu_pct ?? '-'}%; pushing one item to each queue, ${CONFIG.longPollInFlight} in flight${processes === 2 ? ' through the second process' : ''} ...`,
    );

    const pushedAt = new Array(n).fill(null);
    const cpu2 = sample();
    const pushStarted = performance.now();
    await forEachLimit(ids, CONFIG.longPollInFlight, async (id, i) => {
      const { status, body } = await httpRequest(pusher.url, 'POST', `/queue/${encodeURIComponent(id)}/push`, `{"item":{"i":${i}}}`);
      if (status !== 200) throw new Error(`push to ${id}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
      pushedAt[i] = performance.now();
    });
    const pushSeconds = (performance.now() - pushStarted) / 1000;
    const cpu3 = sample();
    const busy = (a, b) => (a === null || b === null ? null : round(((b - a) / CLK_TCK / pushSeconds) * 100, 1));
    const pushCpu = {
      server_cpu_pct: busy(cpu2.server, cpu3.server),
      pusher_cpu_pct: busy(cpu2.pusher, cpu3.pusher),
      postgres_cpu_pct: busy(cpu2.postgres, cpu3.postgres),
    };
    giveUpAt = performance.now() + 30_000;
    await Promise.race([Promise.all(consumers), sleep(60_000)]);
    giveUpAt = 0;
    const received = answeredAt.filter((a) => a !== null).length;
    const latencies = answeredAt.map((a, i) => (a === null || pushedAt[i] === null ? null : a - pushedAt[i])).filter((x) => x !== null);
    const latency = summarize(latencies);
    // Split: consumers whose first poll received the item, and those whose 20 s wait had run out
    // first (the push phase outlasted it), who received it through a poll sent again.
    const latencyOf = (repolled) =>
      summarize(answeredAt.flatMap((a, i) => (a === null || pushedAt[i] === null || repolledBefore[i] !== repolled ? [] : [a - pushedAt[i]])));
    const firstPoll = latencyOf(false);
    const afterRepoll = latencyOf(true);
    const wakeAfter = await metricsOf(target.url);
    const wake = (cause) =>
      (wakeAfter.get(`pushpop_long_poll_wake_ups_total{cause="${cause}"}`) ?? 0) - (wakeBefore.get(`pushpop_long_poll_wake_ups_total{cause="${cause}"}`) ?? 0);
    const row = {
      round: roundNo,
      target: target.name,
      scenario: name,
      title: `long polls, ${processes === 2 ? 'pushes through a second process' : 'one process'}`,
      processes,
      polls: n,
      waiting_at_start: waitingAtStart,
      open_seconds: round(openSeconds, 2),
      memory_per_poll_kb: rssBefore && rssWaiting ? round((rssWaiting - rssBefore) / n, 2) : null,
      idle,
      push_seconds: round(pushSeconds, 2),
      push_cpu: pushCpu,
      pushes_per_s: Math.round(n / pushSeconds),
      received,
      repolls,
      wake_ups: { local: wake('local'), notification: wake('notification'), recheck: wake('recheck') },
      notifications_received:
        (wakeAfter.get('pushpop_notifications_total{direction="received"}') ?? 0) - (wakeBefore.get('pushpop_notifications_total{direction="received"}') ?? 0),
      latency_ms: latency,
      latency_first_poll_ms: firstPoll,
      latency_after_repoll_ms: afterRepoll,
      // the median latency of each tenth of the queues, in push order: shows whether it grew as the pushes went on
      latency_p50_ms_by_tenth: Array.from({ length: 10 }, (_, k) => {
        const part = answeredAt.slice(Math.floor((k * n) / 10), Math.floor(((k + 1) * n) / 10)).map((a, j) => {
          const i = Math.floor((k * n) / 10) + j;
          return a === null || pushedAt[i] === null ? null : a - pushedAt[i];
        });
        return summarize(part.filter((x) => x !== null)).p50;
      }),
      errors: errors.slice(0, 20),
      error_count: errors.length,
      cpu: {},
    };
    runRows.push(row);
    const bad = [];
    if (received !== n) bad.push(`${n - received} of ${fmtNum(n)} consumers did not receive their item`);
    if (errors.length > 0) bad.push(`${errors.length} failed polls (${errors[0]})`);
    if (idle.polls_answered > 0 || idle.repolls > 0 || (waitingAtStart === n && idle.waiting_after !== n))
      bad.push(`the idle window was not idle (${idle.polls_answered} answered, ${idle.repolls} re-polls, ${idle.waiting_after} waiting at its end)`);
    for (const b of bad) problems.push(`${target.name} ${name} round ${roundNo}: ${b}`);
    const misses = [];
    if (idle.transactions_per_s > 20) misses.push(`${idle.transactions_per_s} transactions/s > 20`);
    if (idle.server_cpu_pct !== null && idle.server_cpu_pct > 10) misses.push(`service CPU ${idle.server_cpu_pct}% > 10%`);
    if (latency.p99 !== null && latency.p99 > 200) misses.push(`p99 ${fmtMs(latency.p99)} ms > 200 ms`);
    row.target_missed = misses;
    progress(
      `    ${fmtNum(received)} of ${fmtNum(n)} received; poll answered − push answered p50 ${fmtMs(latency.p50)} ms, p99 ${fmtMs(latency.p99)} ms, max ${fmtMs(latency.max)} ms; ` +
        `(first poll: ${fmtNum(firstPoll.count)}, p99 ${fmtMs(firstPoll.p99)} ms; after its wait ran out: ${fmtNum(afterRepoll.count)}, p99 ${fmtMs(afterRepoll.p99)} ms); ` +
        `pushes ${fmtNum(row.pushes_per_s)}/s; ${repolls} re-polls; wake-ups local ${row.wake_ups.local}, notification ${row.wake_ups.notification}, re-check ${row.wake_ups.recheck}; ` +
        `${row.memory_per_poll_kb ?? '-'} KB RSS per waiting poll` +
        (misses.length ? ` — target missed: ${misses.join('; ')}` : '') +
        (bad.length ? ` — PROBLEM: ${bad.join('; ')}` : ''),
    );
  } finally {
    giveUpAt = 0;
    pollAgent.destroy();
    await monitor.end().catch(() => undefined);
  }
}
