#!/usr/bin/env node
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { PushpopClient } from './client.js';
import type { Handler } from './consumer.js';
import { isPushpopError, PushpopError } from './errors.js';
import type { Item, PopResult, QueueSettingsUpdate, Schedule } from './types.js';

interface GlobalOptions {
  url?: string;
  apiKey?: string;
  json?: boolean;
  timeout?: number;
}

const integer = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n)) throw new InvalidArgumentError('not an integer');
  return n;
};

function parseItem(text: string): Item {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new InvalidArgumentError(`not JSON: ${text.slice(0, 80)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidArgumentError('an item is a JSON object');
  return value as Item;
}

/** A settings value from the command line: JSON when it parses (numbers, booleans, null), else the text. */
function parseSetting(pair: string, previous: QueueSettingsUpdate = {}): QueueSettingsUpdate {
  const at = pair.indexOf('=');
  if (at < 1) throw new InvalidArgumentError(`expected name=value, got ${pair}`);
  const raw = pair.slice(at + 1);
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    // a plain string such as exclusive
  }
  return { ...previous, [pair.slice(0, at)]: value };
}

async function* stdinLines(): AsyncGenerator<string> {
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) if (line.trim()) yield line;
}

function print(json: boolean | undefined, value: unknown, text: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${text()}\n`);
}

/** Whether `--json` is among the options (before a `--`, after which come a command's own arguments). */
function jsonRequested(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).includes('--json');
}

/** An error as the JSON document `--json` prints: `{"status", "error_code", "message"}` (status 0: no answer from the service). */
function errorJson(error: unknown): { status: number; error_code: string; message: string } {
  if (error instanceof PushpopError) return { status: error.status, error_code: error.errorCode, message: error.message };
  if (error instanceof CommanderError) return { status: 0, error_code: 'INVALID_ARGUMENT', message: error.message.replace(/^error: /, '') };
  return { status: 0, error_code: 'CLIENT_ERROR', message: error instanceof Error ? error.message : String(error) };
}

/**
 * The queue and the command of `consume`, from its words (the queue argument and the command's words, as commander
 * parsed them). Commander drops the `--`, so the raw arguments say which words came before it: those name the queue
 * (refused with --prefix, which has none); every word after the first `--` is the command's.
 */
function consumeTarget(args: readonly string[], words: string[], prefix: string | undefined): { queueId?: string; command: string[] } {
  const separator = args.indexOf('--');
  const beforeSeparator = words.length - (separator === -1 ? 0 : args.length - separator - 1);
  if (prefix !== undefined) {
    if (beforeSeparator > 0)
      throw new InvalidArgumentError(`consume takes a queue or --prefix, not both: got queue ${words[0]} and --prefix ${prefix} (the command goes after --)`);
    return { command: words };
  }
  if (beforeSeparator <= 0) throw new InvalidArgumentError('consume needs a queue, or --prefix');
  return { queueId: words[0], command: words.slice(1) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Progress on stderr, only for a person at a terminal. */
function progress(text: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\r${text}`);
}

/** Stops on SIGINT/SIGTERM: the first signal asks nicely (`stop`), a second one exits. */
function onStopSignal(stop: () => Promise<void>): void {
  let stopping = false;
  const handler = () => {
    if (stopping) process.exit(130);
    stopping = true;
    stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}

/** The command line; `args` are the arguments it will parse (after the script's path), `json` whether `--json` is among them. */
export function program(args: readonly string[], json = jsonRequested(args)): Command {
  const cli = new Command('pushpop')
    .description('Command line for a pushpop service')
    .addOption(new Option('--url <url>', 'service address').env('PUSHPOP_URL').default('http://127.0.0.1:8000'))
    .addOption(new Option('--api-key <key>', 'API key').env('PUSHPOP_API_KEY'))
    .option('--timeout <ms>', 'per-request timeout', integer)
    .option('--json', 'print JSON (one document per line), errors included')
    // Errors reach main(), which prints them (as JSON with --json); subcommands inherit this.
    .exitOverride()
    .configureOutput({ outputError: (text, write) => (json ? undefined : write(text)) })
    .showHelpAfterError(!json);

  const connect = (): { client: PushpopClient; opts: GlobalOptions } => {
    const opts = cli.opts<GlobalOptions>();
    const client = new PushpopClient({
      baseUrl: opts.url,
      ...(opts.apiKey ? { apiKey: opts.apiKey } : {}),
      ...(opts.timeout ? { timeoutMs: opts.timeout } : {}),
    });
    return { client, opts };
  };

  cli
    .command('push')
    .description('push one item (given as JSON), or one per line of stdin')
    .argument('<queue>')
    .argument('[item]', 'the item as JSON; without it, one item per stdin line')
    .option('-p, --priority <n>', 'priority', integer)
    .option('--delay <seconds>', 'delay_seconds', integer)
    .option('--dedup-id <id>', 'dedup_id')
    .action(async (queueId: string, itemText: string | undefined, o: { priority?: number; delay?: number; dedupId?: string }) => {
      const { client, opts } = connect();
      const options = { priority: o.priority, delaySeconds: o.delay, dedupId: o.dedupId };
      if (itemText !== undefined) {
        const answer = await client.queue(queueId).push(parseItem(itemText), options);
        print(opts.json, answer, () => (answer.duplicate ? 'duplicate, not pushed' : answer.message));
        return;
      }
      const producer = client.producer(queueId, { lingerMs: 5 });
      let count = 0;
      let duplicates = 0;
      const waiting: Promise<void>[] = [];
      for await (const line of stdinLines()) {
        waiting.push(
          producer.push(parseItem(line), { priority: o.priority, delaySeconds: o.delay }).then((r) => {
            if (r.duplicate) duplicates++;
            else count++;
            progress(`pushed ${count}`);
          }),
        );
        if (waiting.length >= 10_000) await Promise.all(waiting.splice(0));
      }
      await Promise.all(waiting);
      print(opts.json, { success: true, count, duplicates }, () => `pushed ${count} item(s) to ${queueId}`);
    });

  cli
    .command('pop')
    .description('pop items (removed; with --ack held under a lock and acknowledged once printed)')
    .argument('<queue>')
    .option('-n, --depth <n>', 'items at most (1-100)', integer, 1)
    .option('--ack', 'pop with require_ack and acknowledge after printing')
    .option('--per-item', 'with --ack: each item under a lock of its own (lock_per_item; shared queues), all acknowledged in one request')
    .option('--wait <seconds>', 'long poll up to this long (0-20), also waiting out a lock another consumer holds (423)', integer, 0)
    .option('--ttl <seconds>', 'lock time to live with --ack', integer)
    .action(async (queueId: string, o: { depth: number; ack?: boolean; perItem?: boolean; wait: number; ttl?: number }) => {
      const { client, opts } = connect();
      const queue = client.queue(queueId);
      const deadline = Date.now() + o.wait * 1000;
      let answer: PopResult<Item> & { lock_ids?: string[] };
      for (;;) {
        const waitSeconds = Math.max(0, Math.min(o.wait, Math.ceil((deadline - Date.now()) / 1000)));
        try {
          answer = o.perItem
            ? // lock_per_item: the route's own parameter, passed as it is (the server answers 400 without --ack).
              await client.call({
                method: 'POST',
                path: '/queue/{queue_id}/pop',
                params: {
                  path: { queue_id: queueId },
                  query: { depth: o.depth, require_ack: o.ack === true, lock_per_item: true, wait_seconds: waitSeconds, ttl_seconds: o.ttl },
                },
                extraTimeoutMs: waitSeconds * 1000,
              })
            : await queue.pop({ depth: o.depth, requireAck: o.ack === true, waitSeconds, ...(o.ttl ? { ttlSeconds: o.ttl } : {}) });
          break;
        } catch (error) {
          // An exclusive queue locked by a consumer: look again when the lock ends (its expiry, or sooner), within the wait.
          const remaining = deadline - Date.now();
          if (!isPushpopError(error, 'QUEUE_LOCKED') || remaining <= 0) throw error;
          const untilExpiry = Number(error.body?.lock_expires_at) * 1000 - Date.now();
          await sleep(Math.max(50, Math.min(remaining, 500, Number.isFinite(untilExpiry) ? untilExpiry : 500)));
        }
      }
      print(opts.json, answer, () => answer.items.map((item) => JSON.stringify(item)).join('\n') || '(empty)');
      if (o.ack && answer.lock_id) await queue.acknowledge(answer.lock_id);
      if (o.ack && answer.lock_ids?.length)
        await client.call({
          method: 'POST',
          path: '/queue/{queue_id}/acknowledge/batch',
          params: { path: { queue_id: queueId } },
          body: { lock_ids: answer.lock_ids },
        });
    });

  cli
    .command('peek')
    .description('show the next items in pop order without taking them (through the inspection routes)')
    .argument('<queue>')
    .option('-n, --limit <n>', 'items at most', integer, 10)
    .action(async (queueId: string, o: { limit: number }) => {
      const { client, opts } = connect();
      const answer = await client.queue(queueId).peek(o.limit);
      print(opts.json, { queue_id: queueId, ...answer }, () => {
        const lines = answer.items.map(({ priority, item }) => `${priority}\t${JSON.stringify(item)}`);
        if (lines.length === 0) lines.push('(empty)');
        if (answer.hidden > 0) lines.push(`(${answer.hidden} item(s) given back to the front are not shown; a pop takes them first)`);
        return lines.join('\n');
      });
    });

  cli
    .command('stats')
    .description("a queue's counts, settings and lock(s)")
    .argument('<queue>')
    .action(async (queueId: string) => {
      const { client, opts } = connect();
      const info = await client.queue(queueId).info();
      print(opts.json, info, () => {
        const lines = [`queue ${info.queue_id}: ${info.count} item(s), ${info.delayed ?? 0} delayed`];
        for (const [p, prio] of Object.entries(info.priorities)) lines.push(`  priority ${p}: ${prio.count}`);
        if (info.lock) lines.push(`  locked: ${info.lock.item_count} item(s) until ${new Date(info.lock.expires_at * 1000).toISOString()}`);
        if (info.locks) lines.push(`  locks: ${info.locks.count} holding ${info.locks.item_count} item(s)`);
        lines.push(`  settings: ${JSON.stringify(info.config)}`);
        return lines.join('\n');
      });
    });

  cli
    .command('list')
    .description('list queues')
    .option('--prefix <prefix>', 'only ids starting with this')
    .action(async (o: { prefix?: string }) => {
      const { client, opts } = connect();
      const queues: { queue_id: string; count: number; locked: boolean }[] = [];
      for await (const q of client.allQueues(o.prefix ? { prefix: o.prefix } : {})) queues.push(q);
      print(opts.json, { queues }, () => queues.map((q) => `${q.queue_id}\t${q.count}${q.locked ? '\tlocked' : ''}`).join('\n') || '(no queues)');
    });

  const settings = cli.command('settings').description("a queue's settings");
  settings
    .command('get')
    .argument('<queue>')
    .action(async (queueId: string) => {
      const { client, opts } = connect();
      const answer = await client.queue(queueId).settings();
      print(opts.json, answer, () =>
        Object.entries(answer)
          .map(([k, v]) => `${k}\t${JSON.stringify(v)}`)
          .join('\n'),
      );
    });
  settings
    .command('set')
    .argument('<queue>')
    .argument('<name=value...>', 'e.g. lock_mode=shared max_deliveries=5 dead_letter_queue=orders.dlq paused=true')
    .action(async (queueId: string, pairs: string[]) => {
      const { client, opts } = connect();
      const update = pairs.reduce<QueueSettingsUpdate>((acc, pair) => parseSetting(pair, acc), {});
      const answer = await client.queue(queueId).updateSettings(update);
      print(opts.json, answer, () =>
        Object.entries(answer)
          .map(([k, v]) => `${k}\t${JSON.stringify(v)}`)
          .join('\n'),
      );
    });

  const schedule = cli.command('schedule').description('schedules: recurring pushes by cron expression');
  const scheduleLine = (s: Schedule): string => {
    const at = (t: number | null) => (t === null ? '-' : new Date(t * 1000).toISOString());
    return `${s.schedule_id}\t${s.cron}\t${s.timezone}\t-> ${s.queue_id}\tnext ${s.paused ? 'paused' : at(s.next_run_at)}\tlast ${at(s.last_run_at)}`;
  };
  schedule
    .command('list')
    .description('list schedules with their next and last run')
    .action(async () => {
      const { client, opts } = connect();
      const schedules: Schedule[] = [];
      for await (const s of client.allSchedules()) schedules.push(s);
      print(opts.json, { schedules }, () => schedules.map(scheduleLine).join('\n') || '(no schedules)');
    });
  schedule
    .command('get')
    .argument('<schedule>')
    .action(async (scheduleId: string) => {
      const { client, opts } = connect();
      const answer = await client.getSchedule(scheduleId);
      print(opts.json, answer, () => scheduleLine(answer));
    });
  schedule
    .command('put')
    .description('create or replace a schedule: at each time of <cron> push <item> to <queue>')
    .argument('<schedule>')
    .argument('<queue>')
    .argument('<cron>', '5 fields, or 6 with seconds first, e.g. "0 6 * * 1-5"')
    .argument('<item>', 'the item as JSON')
    .option('--tz <zone>', 'IANA time zone', 'UTC')
    .option('-p, --priority <n>', 'priority', integer)
    .option('--paused', 'create it paused')
    .action(async (scheduleId: string, queueId: string, cron: string, item: string, o: { tz: string; priority?: number; paused?: boolean }) => {
      const { client, opts } = connect();
      const answer = await client.putSchedule(scheduleId, {
        queue_id: queueId,
        cron,
        timezone: o.tz,
        item: parseItem(item),
        ...(o.priority !== undefined ? { priority: o.priority } : {}),
        ...(o.paused ? { paused: true } : {}),
      });
      print(opts.json, answer, () => scheduleLine(answer));
    });
  schedule
    .command('delete')
    .argument('<schedule>')
    .action(async (scheduleId: string) => {
      const { client, opts } = connect();
      const answer = await client.deleteSchedule(scheduleId);
      print(opts.json, answer, () => `deleted ${scheduleId}`);
    });

  cli
    .command('consume')
    .description(
      'run a shell command per item, the item as JSON on stdin: exit 0 acknowledges, anything else gives it back (retried with backoff, dead-lettered after --max-attempts). ' +
        "With --prefix, of the shared queues whose ids start with it, taken in turn (fair pops): PUSHPOP_QUEUE and each event name the item's queue",
    )
    .argument('[queue]', 'the queue (none with --prefix)')
    .argument('[command...]', 'after --, the command and its arguments')
    .option('--prefix <prefix>', 'consume every shared queue whose id starts with this instead of one queue')
    .option('-c, --concurrency <n>', 'commands at once (shared queues; an exclusive queue takes one item at a time)', integer, 1)
    .option('--ttl <seconds>', 'lock time to live (extended while a command runs)', integer, 30)
    .option('--wait <seconds>', 'long-poll wait', integer, 20)
    .option('--max-attempts <n>', "attempts per item before it is dead-lettered (default: the queue's max_deliveries, else 5)", integer)
    .action(
      async (
        queueOrCommand: string | undefined,
        rest: string[],
        o: { prefix?: string; concurrency: number; ttl: number; wait: number; maxAttempts?: number },
      ) => {
        const prefix = o.prefix;
        const target = consumeTarget(args, queueOrCommand === undefined ? rest : [queueOrCommand, ...rest], prefix);
        if (target.command.length === 0) throw new InvalidArgumentError('consume needs the command to run per item, after --');
        const { client, opts } = connect();
        const shell = target.command.join(' ');
        let done = 0;
        let failed = 0;
        const handler: Handler<Item> = ({ item, deliveryCount, signal, queueId }) =>
          new Promise<void>((resolve, reject) => {
            const child = spawn(shell, {
              shell: true,
              stdio: ['pipe', 'inherit', 'inherit'],
              signal,
              env: { ...process.env, PUSHPOP_QUEUE: queueId, PUSHPOP_DELIVERY_COUNT: String(deliveryCount) },
            });
            child.on('error', reject);
            child.on('exit', (code, sig) => {
              if (code === 0) resolve();
              else reject(new Error(`${shell} exited with ${code ?? sig}`));
            });
            child.stdin.on('error', () => {});
            child.stdin.end(`${JSON.stringify(item)}\n`);
          });
        const options = {
          concurrency: o.concurrency,
          ttlSeconds: o.ttl,
          waitSeconds: o.wait,
          ...(o.maxAttempts !== undefined ? { maxAttempts: o.maxAttempts } : {}),
        };
        const consumer = prefix !== undefined ? client.consumePrefix(prefix, handler, options) : client.consume(target.queueId!, handler, options);
        const message = (error: unknown) => (error instanceof Error ? error.message : String(error));
        const line = (value: Record<string, unknown>, text: string) => {
          if (opts.json) print(true, value, () => '');
          else process.stderr.write(`${text}\n`);
        };
        // Of a prefix, every line names the item's queue.
        const from = (queueId: string) => (prefix !== undefined ? `${queueId}: ` : '');
        consumer.on('completed', ({ item, deliveryCount, lockId, queueId }) => {
          done++;
          const event = { event: 'completed', queue_id: queueId, item, delivery_count: deliveryCount, lock_id: lockId };
          if (opts.json) print(true, event, () => '');
          else if (prefix !== undefined) line(event, `${from(queueId)}done (delivery ${deliveryCount})`);
          progress(`done ${done}, failed ${failed}`);
        });
        consumer.on('retrying', ({ item, deliveryCount, lockId, queueId, error, delaySeconds }) =>
          line(
            { event: 'retrying', queue_id: queueId, item, delivery_count: deliveryCount, lock_id: lockId, delay_seconds: delaySeconds, error: message(error) },
            `${from(queueId)}${message(error)}: retrying in ${delaySeconds} s`,
          ),
        );
        consumer.on('failed', ({ item, deliveryCount, lockId, queueId, error, deadLettered, delaySeconds }) => {
          failed++;
          line(
            { event: 'failed', queue_id: queueId, item, delivery_count: deliveryCount, lock_id: lockId, dead_lettered: deadLettered, error: message(error) },
            `${from(queueId)}${message(error)}: gave up after ${deliveryCount} attempt(s)${deadLettered ? ', dead-lettered' : `, no dead-letter queue: back in ${delaySeconds} s`}`,
          );
        });
        consumer.on('deadLettered', ({ item, deliveryCount, lockId, queueId, deadLetterQueue }) => {
          if (opts.json)
            print(
              true,
              { event: 'dead_lettered', queue_id: queueId, item, delivery_count: deliveryCount, lock_id: lockId, dead_letter_queue: deadLetterQueue },
              () => '',
            );
        });
        consumer.on('drained', () => {
          if (opts.json) print(true, { event: 'drained' }, () => '');
        });
        consumer.on('error', (error) => line({ event: 'error', error: errorJson(error) }, message(error)));
        consumer.on('warning', (warning) => line({ event: 'warning', message: warning }, `warning: ${warning}`));
        consumer.on('lockLost', ({ lockId, queueId, items }) =>
          line({ event: 'lock_lost', queue_id: queueId, lock_id: lockId, items }, `${from(queueId)}lock ${lockId} lost`),
        );
        onStopSignal(() => consumer.close());
        await new Promise(() => {});
      },
    );

  cli
    .command('tail')
    .description('pop items as they come and print them (removes them: for debugging)')
    .argument('<queue>')
    .option('-n, --depth <n>', 'items per pop', integer, 100)
    .action(async (queueId: string, o: { depth: number }) => {
      const { client, opts } = connect();
      const queue = client.queue(queueId);
      const stop = new AbortController();
      onStopSignal(async () => stop.abort());
      while (!stop.signal.aborted) {
        try {
          const answer = await queue.pop({ depth: o.depth, waitSeconds: 20, signal: stop.signal });
          for (const item of answer.items) print(opts.json, item, () => JSON.stringify(item));
          if (answer.paused) await new Promise((r) => setTimeout(r, 1000));
        } catch (error) {
          if (stop.signal.aborted) break;
          throw error;
        }
      }
    });

  return cli;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const json = jsonRequested(args);
  try {
    await program(args, json).parseAsync(process.argv);
  } catch (error) {
    // Help and version end commander with exit code 0; usage errors were printed by commander unless --json.
    if (error instanceof CommanderError && error.exitCode === 0) return;
    if (json) process.stdout.write(`${JSON.stringify({ error: errorJson(error) })}\n`);
    else if (!(error instanceof CommanderError) || error instanceof InvalidArgumentError) process.stderr.write(`pushpop: ${errorJson(error).message}\n`);
    process.exitCode = error instanceof CommanderError && error.exitCode > 0 ? error.exitCode : 1;
  }
}

await main();
