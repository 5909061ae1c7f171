// A target: one server the benchmark starts and measures (pushpop on its embedded database or
// on the machine's PostgreSQL, or a peer of bench/peers with its store), how it is stopped, and
// what latest.json records of it.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import pg from 'pg';
import { benchDir, CONFIG, DATABASES, dbUrl, PEER_SCRIPTS, REDIS_TARGETS, repoRoot } from '../common/config.mjs';
import { problems, runState } from '../common/results.mjs';
import { errorText, freePort, log, packageVersion, round, sleep } from '../common/util.mjs';
import { adminQuery, recreateDatabase } from './postgres.mjs';
import { findEmbeddedPostmaster, isAlive, postgresBinaryVersion, readStat, rssKb } from './proc.mjs';
import { embeddedPostmasters, startServer, stopOrphanPostmaster, tempDirs } from './processes.mjs';
import { startRedis } from './redis.mjs';

const pushpopDir = CONFIG.pushpopDir;

/** Environment of a pushpop child: only what the benchmark sets; everything else at its default. */
export function pushpopEnv(port) {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (
      [
        'DATABASE_URL',
        'DATA_DIR',
        'SEGMENT_SIZE',
        'BUFFER_SEGMENTS',
        'MAX_PENDING_PER_QUEUE',
        'MAX_WAITING_POLLS',
        'DB_POOL_SIZE',
        'NODE_OPTIONS',
        'WORKERS',
        'ACTOR_IDLE_TIMEOUT_MS',
        'MAX_ITEM_BYTES',
        'MAX_BODY_BYTES',
        'LOCK_SWEEP_INTERVAL_MS',
        'MAX_PRIORITY',
        'API_KEYS',
        'API_KEYS_FILE',
        'RATE_LIMIT_PER_SECOND',
        'RATE_LIMIT_BURST',
      ].includes(key)
    )
      delete env[key];
  }
  return Object.assign(env, { PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', NODE_ENV: 'production' });
}

export async function startTarget(name, machine) {
  const port = await freePort();
  const target = {
    name,
    kind: name.startsWith('pushpop-') ? 'pushpop' : 'peer',
    port,
    db: /** @type {string | null} */ (null),
    pool: /** @type {pg.Pool | null} */ (null),
    dataDir: /** @type {string | null} */ (null),
    postmaster: /** @type {{ pid: number, starttime: number } | null} */ (null),
    pgLocation: /** @type {string | null} */ (null),
    pgVersion: /** @type {string | null} */ (null),
    redis: /** @type {Awaited<ReturnType<typeof startRedis>> | null} */ (null),
    dead: /** @type {string | null} */ (null),
    pushRate: /** @type {number | null} */ (null),
    rss: /** @type {{ round: number, kb: number | null }[]} */ ([]),
    depthFill: /** @type {Record<string, number | null> | null} */ (null),
    depthFilled: false,
    logLines: /** @type {string[] | null} */ (null),
    workers: /** @type {{ pid: number, starttime: number } | null} */ (null),
  };
  let args;
  let env;
  let cwd = repoRoot;
  let readyPath = '/health/ready';
  if (target.kind === 'pushpop') {
    env = pushpopEnv(port);
    args = [join(pushpopDir, 'dist/main.js')];
    cwd = pushpopDir;
    if (name === 'pushpop-postgres') {
      target.db = DATABASES[name];
      await recreateDatabase(target.db);
      env.DATABASE_URL = dbUrl(target.db);
      // Several worker processes (pushpop's WORKERS); their CPU is read as the primary's tree.
      if (CONFIG.workers > 1) env.WORKERS = String(CONFIG.workers);
    } else {
      target.dataDir = mkdtempSync(join(os.tmpdir(), 'pushpop-bench-'));
      tempDirs.add(target.dataDir);
      env.DATA_DIR = target.dataDir;
    }
  } else {
    let storeUrl;
    if (REDIS_TARGETS.includes(name)) {
      target.redis = await startRedis(`${name} redis-server`);
      storeUrl = target.redis.url;
    } else {
      target.db = DATABASES[name];
      await recreateDatabase(target.db);
      storeUrl = dbUrl(target.db);
    }
    env = { ...process.env };
    delete env.NODE_OPTIONS;
    args = [join(benchDir, 'peers', PEER_SCRIPTS[name]), `--port=${port}`, `--database-url=${storeUrl}`];
    readyPath = '/health/ready';
  }
  let started;
  try {
    started = await startServer({ label: name, args, env, cwd, port, readyPath });
  } catch (error) {
    if (target.redis) await target.redis.stop();
    throw error;
  }
  const { proc, readySeconds } = started;
  target.proc = proc;
  target.url = proc.url;
  if (name === 'pushpop-postgres' && CONFIG.workers > 1) {
    const own = readStat(proc.pid);
    target.workers = own ? { pid: proc.pid, starttime: own.starttime } : null;
  }
  target.readySeconds = round(readySeconds, 1);
  if (name === 'pushpop-embedded') {
    target.postmaster = findEmbeddedPostmaster(proc.pid, target.dataDir);
    if (target.postmaster) {
      embeddedPostmasters.add(target.postmaster);
      target.pgLocation = 'embedded server (child process)';
      target.pgVersion = postgresBinaryVersion(target.postmaster.pid);
    } else {
      target.pgLocation = 'in process';
      const pglite = packageVersion('@electric-sql/pglite', pushpopDir);
      target.pgVersion = pglite ? `PGlite ${pglite} (in process)` : 'in process';
    }
  } else if (target.redis) {
    target.pgLocation = 'redis-server (started for it)';
    target.pgVersion = target.redis.version ? `Redis ${target.redis.version}` : 'Redis';
  } else {
    target.postmaster = machine.postmaster;
    target.pgLocation = 'machine PostgreSQL (shared)';
    target.pgVersion = machine.version;
  }
  if (target.kind === 'peer' && target.db) target.pool = new pg.Pool({ connectionString: dbUrl(target.db), max: 2, application_name: 'pushpop-bench-counts' });
  return target;
}

/** Stops a target and what belongs to it (a second process, its store, its data directory); keeps its log lines. */
export async function stopTarget(t) {
  const rss = t.proc.alive() ? rssKb(t.proc.pid) : null;
  if (rss !== null) t.rssEnd = rss;
  // a second process first: on the embedded database the first owns the server
  if (t.second) {
    await t.second.proc.stop();
    rmSync(t.second.dataDir, { recursive: true, force: true });
    tempDirs.delete(t.second.dataDir);
  }
  const exit = await t.proc.stop();
  if (t.pool) await t.pool.end().catch(() => undefined);
  if (t.redis) {
    const redisExit = await t.redis.stop();
    if (redisExit && redisExit.code !== 0 && !runState.interrupted)
      problems.push(`${t.name}: its redis-server exited with code ${redisExit.code} when stopped`);
  }
  if (t.postmaster && t.name === 'pushpop-embedded' && isAlive(t.postmaster)) {
    await sleep(2000);
    if (await stopOrphanPostmaster(t.postmaster))
      problems.push(`${t.name}: its embedded PostgreSQL (pid ${t.postmaster.pid}) was still running after the service stopped; stopped it`);
  }
  if (t.dataDir) {
    rmSync(t.dataDir, { recursive: true, force: true });
    tempDirs.delete(t.dataDir);
  }
  // the servers log at LOG_LEVEL=warn; shown when something went wrong with the target, always kept in latest.json
  t.logLines = t.proc
    .output()
    .split('\n')
    .filter((l) => l.trim() && !/ (listening on|stopped \()/.test(l));
  const troubled = t.dead || problems.some((p) => p.startsWith(`${t.name} `) || p.startsWith(`${t.name}:`));
  if (t.logLines.length > 0 && troubled) {
    log(`${t.name} log (${t.logLines.length} line(s)${t.logLines.length > 15 ? ', last 15 shown' : ''}):`);
    for (const line of t.logLines.slice(-15)) log(`    ${line}`);
  } else if (t.logLines.length > 0) {
    log(`${t.name}: ${t.logLines.length} log line(s) at LOG_LEVEL=warn (the last 100 are in latest.json)`);
  }
  log(`${t.name} stopped (${exit ? `code ${exit.code}, signal ${exit.signal}` : 'already gone'})`);
  if (exit && exit.code !== 0 && exit.code !== null && !runState.interrupted) problems.push(`${t.name}: the server exited with code ${exit.code} when stopped`);
}

/** Drops a target's database on the machine's PostgreSQL. */
export async function dropDatabaseOf(t) {
  if (t.db) await adminQuery(`DROP DATABASE IF EXISTS ${t.db} WITH (FORCE)`).catch((error) => log(`could not drop ${t.db}: ${errorText(error)}`));
}

/** What latest.json records of a target. */
export function targetInfo(t) {
  return {
    url: t.url,
    pid: t.proc.pid,
    ready_seconds: t.readySeconds,
    database: t.db ?? (t.dataDir ? 'embedded (temporary DATA_DIR)' : null),
    postgres: t.pgLocation,
    postgres_version: t.pgVersion,
    postmaster_pid: t.postmaster?.pid ?? null,
    redis: t.redis ? { pid: t.redis.proc?.pid ?? null, port: t.redis.port, version: t.redis.version } : null,
    rss_kb_by_round: t.rss,
    rss_kb_end: t.rssEnd ?? null,
    depth_fill: t.depthFill,
    dead: t.dead,
    log_tail: (t.logLines ?? []).slice(-100),
  };
}
