// The redis-server the benchmark starts for a Redis peer (bullmq-redis): never the machine's own.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, sleep } from '../common/util.mjs';
import { readStat } from './proc.mjs';
import { children, killGroup, tempDirs } from './processes.mjs';

/**
 * A redis-server of the benchmark's own for a Redis peer: loopback, a free port (never the
 * machine's 6379), its data in a fresh temporary directory (removed at the end), the
 * append-only file fsynced every second (`--appendonly yes --appendfsync everysec`) and no RDB
 * snapshots (the append-only file is the durability measured). Started in its own process group
 * like the servers, stopped with SIGTERM (Redis fsyncs and exits), SIGKILL after 10 s.
 */
export async function startRedis(label) {
  const port = await freePort();
  const dir = mkdtempSync(join(os.tmpdir(), 'pushpop-bench-redis-'));
  tempDirs.add(dir);
  const args = ['--bind', '127.0.0.1', '--port', String(port), '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--save', '', '--logfile', ''];
  const child = spawn('redis-server', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  const keep = (chunk) => {
    output += chunk.toString();
    if (output.length > 100_000) output = output.slice(-50_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exitInfo = null;
  let spawnError = null;
  const exited = new Promise((r) => {
    child.on('exit', (code, signal) => r((exitInfo = { code, signal })));
    child.on('error', (error) => {
      spawnError = error;
      r((exitInfo = { code: null, signal: null }));
    });
  });
  const entry = { child, pid: child.pid, exited };
  if (child.pid) children.add(entry);
  void exited.then(() => children.delete(entry));
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 200,
    connectionName: 'pushpop-bench-counts',
  });
  client.on('error', () => undefined); // while it starts; commands still reject
  const redis = {
    label,
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    client,
    proc: child.pid ? { pid: child.pid, starttime: readStat(child.pid)?.starttime ?? null } : null,
    version: /** @type {string | null} */ (null),
    output: () => output,
    alive: () => exitInfo === null,
    async stop() {
      client.disconnect();
      if (exitInfo === null) {
        try {
          child.kill('SIGTERM');
        } catch {
          // gone
        }
        if (await Promise.race([exited.then(() => false), sleep(10_000).then(() => true)])) {
          killGroup(child.pid, 'SIGKILL');
          await Promise.race([exited, sleep(5000)]);
        }
      }
      rmSync(dir, { recursive: true, force: true });
      tempDirs.delete(dir);
      return exitInfo;
    },
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exitInfo !== null) {
      if (spawnError?.code === 'ENOENT') throw new Error('redis-server is not installed (Debian: apt-get install redis-server)');
      throw new Error(`redis-server exited before it was ready (code ${exitInfo.code}, signal ${exitInfo.signal}):\n${output.slice(-2000)}`);
    }
    try {
      if (client.status === 'wait') await client.connect();
      if ((await client.ping()) === 'PONG') break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await redis.stop();
      throw new Error(`redis-server not ready within 30 s:\n${output.slice(-2000)}`);
    }
    await sleep(100);
  }
  redis.version = /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? null;
  return redis;
}
