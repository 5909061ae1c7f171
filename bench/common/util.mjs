// Small helpers every part of the benchmark uses: progress lines, percentiles, medians, a free
// port, bounded parallel loops.

import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout } from 'node:timers';
import { repoRoot } from './config.mjs';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const round = (x, digits = 0) => (x === null || x === undefined || Number.isNaN(x) || !Number.isFinite(x) ? null : Number(x.toFixed(digits)));
export const runStarted = performance.now();

export function log(line) {
  process.stdout.write(`${line}\n`);
}
/** A progress line with the time since the start of the run. */
export function progress(line) {
  const s = Math.round((performance.now() - runStarted) / 1000);
  log(`[${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}] ${line}`);
}
export const errorText = (error) => String(error instanceof Error ? error.message : error).split('\n')[0];

/** Nearest-rank percentiles over float samples in milliseconds. */
export function summarize(samples) {
  if (samples.length === 0) return { count: 0, mean: null, p50: null, p90: null, p99: null, max: null };
  const sorted = Float64Array.from(samples).sort();
  const pick = (p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: sorted.length,
    mean: round(sum / sorted.length, 3),
    p50: round(pick(50), 3),
    p90: round(pick(90), 3),
    p99: round(pick(99), 3),
    max: round(sorted[sorted.length - 1], 3),
  };
}

export function median(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

/** The version of package `name` as installed for `fromDir` (node_modules looked up from there). */
export function packageVersion(name, fromDir = repoRoot) {
  let dir = fromDir;
  for (let i = 0; i < 20; i++) {
    try {
      return JSON.parse(readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8')).version ?? null;
    } catch {
      const parent = dirname(dir);
      if (parent === dir) break;
      dir = parent;
    }
  }
  return null;
}

export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

/** Runs `fn` over `items` with at most `limit` at once; stops at the first error. */
export async function forEachLimit(items, limit, fn) {
  let next = 0;
  let failed = null;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (failed === null && next < items.length) {
        const i = next++;
        try {
          await fn(items[i], i);
        } catch (error) {
          failed ??= error;
        }
      }
    }),
  );
  if (failed !== null) throw failed instanceof Error ? failed : new Error(String(failed));
}
