import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './child-service.js';

/**
 * Prometheus binaries for the tests: Debian's `prometheus` package (`apt-get install -y
 * prometheus`) installs both. Override with PROMETHEUS_BIN / PROMTOOL_BIN.
 */
export const PROMETHEUS_BIN = process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus';
export const PROMTOOL_BIN = process.env.PROMTOOL_BIN ?? '/usr/bin/promtool';

/** True on CI (CI set to anything but "", "0" or "false"): a missing binary fails there instead of skipping. */
export const onCI = ((): boolean => {
  const ci = (process.env.CI ?? '').trim().toLowerCase();
  return ci !== '' && ci !== '0' && ci !== 'false';
})();

/** The binaries of `paths` that are not installed. */
export function missingBinaries(...paths: string[]): string[] {
  return paths.filter((p) => !existsSync(p));
}

/** Throws a clear error when `path` is not installed (call first in a test that needs it). */
export function requireBinary(path: string): void {
  if (!existsSync(path)) {
    throw new Error(
      `${path} is not installed${onCI ? ' (required on CI, CI is set)' : ''}: install Debian's prometheus package ` +
        '(apt-get install -y --no-install-recommends prometheus), or point PROMETHEUS_BIN / PROMTOOL_BIN at the binaries',
    );
  }
}

export interface ProcessResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `command args`, writing `input` to its stdin; killed (SIGKILL) after `timeoutMs`. */
export function runProcess(
  command: string,
  args: string[],
  options: { input?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<ProcessResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env: options.env ?? process.env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
    // A child that exits before reading all of stdin must not fail the caller with EPIPE.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

/** A Prometheus server started by {@link startPrometheus}. */
export interface PrometheusServer {
  readonly child: ChildProcess;
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** The job name of the scrape config. */
  readonly job: string;
  output(): string;
  /** SIGTERM, then waits (up to `timeoutMs`, then SIGKILL) for the exit and removes its files. */
  stop(timeoutMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Starts a real Prometheus on a free loopback port with a temporary config and TSDB that
 * scrapes `targets` (loopback `host:port`s) at `metrics_path` every `scrapeIntervalSeconds`,
 * and waits until `/-/ready` answers 200. Independent of any system Prometheus on 9090.
 * Rejects with the server's output if it exits or is not ready within `readyTimeoutMs`.
 */
export async function startPrometheus(options: {
  targets: string[];
  job?: string;
  metricsPath?: string;
  scrapeIntervalSeconds?: number;
  readyTimeoutMs?: number;
}): Promise<PrometheusServer> {
  const job = options.job ?? 'pushpop';
  const interval = `${options.scrapeIntervalSeconds ?? 1}s`;
  const dir = mkdtempSync(join(tmpdir(), 'pushpop-prometheus-'));
  const configFile = join(dir, 'prometheus.yml');
  // JSON is YAML: no YAML writer needed.
  const config = {
    global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
    scrape_configs: [{ job_name: job, metrics_path: options.metricsPath ?? '/metrics', static_configs: [{ targets: options.targets }] }],
  };
  writeFileSync(configFile, JSON.stringify(config, null, 2));

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    PROMETHEUS_BIN,
    [`--config.file=${configFile}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  child.stdout.on('data', (chunk: Buffer) => (log += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
  let hasExited = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolvePromise) => {
    child.on('error', (error) => {
      log += `\nspawn error: ${error.message}`;
      hasExited = true;
      resolvePromise({ code: null, signal: null });
    });
    child.on('exit', (code, signal) => {
      hasExited = true;
      resolvePromise({ code, signal });
    });
  });

  let stopped = false;
  const stop = async (timeoutMs = 15_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> => {
    if (!hasExited) child.kill('SIGTERM');
    const timer = setTimeout(() => {
      if (!hasExited) child.kill('SIGKILL');
    }, timeoutMs);
    const result = await exited;
    clearTimeout(timer);
    if (!stopped) {
      stopped = true;
      rmSync(dir, { recursive: true, force: true });
    }
    return result;
  };
  const server: PrometheusServer = { child, url, job, output: () => log, stop };

  const readyTimeoutMs = options.readyTimeoutMs ?? 30_000;
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    if (hasExited) {
      const { code, signal } = await stop();
      throw new Error(`prometheus exited before it was ready (code ${code}, signal ${signal}):\n${log}`);
    }
    try {
      const res = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(2000) });
      if (res.status === 200) return server;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop(2000);
      throw new Error(`prometheus not ready within ${readyTimeoutMs} ms:\n${log}`);
    }
    await sleep(100);
  }
}

/** One instant vector sample of the query API. */
export interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

/** `GET /api/v1/query?query=…` (instant query, now); throws on a non-success answer. */
export async function instantQuery(server: PrometheusServer, query: string): Promise<PromSample[]> {
  const res = await fetch(`${server.url}/api/v1/query?query=${encodeURIComponent(query)}`, { signal: AbortSignal.timeout(5000) });
  const body = (await res.json()) as { status: string; error?: string; data?: { resultType: string; result: PromSample[] } };
  if (body.status !== 'success' || !body.data) throw new Error(`query ${query} answered ${res.status}: ${JSON.stringify(body)}`);
  if (body.data.resultType !== 'vector') throw new Error(`query ${query} answered a ${body.data.resultType}, not a vector`);
  return body.data.result;
}

/** The scrape targets as Prometheus sees them (for failure messages). */
export async function scrapeTargets(server: PrometheusServer): Promise<unknown> {
  try {
    const res = await fetch(`${server.url}/api/v1/targets`, { signal: AbortSignal.timeout(5000) });
    const body = (await res.json()) as { data?: { activeTargets?: { scrapeUrl: string; health: string; lastError: string }[] } };
    return (body.data?.activeTargets ?? []).map(({ scrapeUrl, health, lastError }) => ({ scrapeUrl, health, lastError }));
  } catch (error) {
    return `targets unavailable: ${(error as Error).message}`;
  }
}
