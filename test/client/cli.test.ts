import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PushpopClient } from '@pushpop/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseKind, pollsWaitingOn, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';
import { freePort } from '../support/child-service.js';
import { buildClient, type ClientBuild, waitFor } from './client-support.js';

describe(`pushpop command line (${databaseKind})`, () => {
  let svc: TestService;
  let build: ClientBuild;
  let client: PushpopClient;
  let dir: string;

  beforeAll(async () => {
    [svc, build] = await Promise.all([startService(), buildClient()]);
    client = new PushpopClient({ baseUrl: svc.url });
    dir = mkdtempSync(join(tmpdir(), 'pushpop-cli-'));
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
    build?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs `pushpop <args>` with PUSHPOP_URL set; resolves with its exit code and output. */
  function pushpop(args: string[], stdin = ''): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = execFile(process.execPath, [build.cliJs, ...args], { env: { ...process.env, PUSHPOP_URL: svc.url } }, (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin!.end(stdin);
    });
  }

  async function json(args: string[], stdin = ''): Promise<Record<string, unknown>> {
    const { code, stdout, stderr } = await pushpop(['--json', ...args], stdin);
    expect(code, stderr).toBe(0);
    return JSON.parse(stdout) as Record<string, unknown>;
  }

  it('pop --ack --per-item takes each item under a lock of its own and acknowledges them all in one request', async () => {
    const q = uniqueQueueId('cli-per-item');
    expect(await json(['settings', 'set', q, 'lock_mode=shared'])).toMatchObject({ lock_mode: 'shared' });
    expect(await json(['push', q], '{"n":1}\n{"n":2}\n{"n":3}\n')).toMatchObject({ count: 3 });
    const popped = await json(['pop', q, '--ack', '--per-item', '-n', '2']);
    expect(popped).toMatchObject({ items: [{ n: 1 }, { n: 2 }], count: 2, locked: true });
    expect(popped.lock_ids).toHaveLength(2);
    const info = await client.queue(q).info();
    expect(info).toMatchObject({ count: 1, locks: { count: 0, item_count: 0 } });
    // Without --ack the server refuses lock_per_item.
    const refused = await pushpop(['pop', q, '--per-item']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('VALIDATION_FAILED');
  });

  it('push, pop, pop --ack --wait, stats, list, settings get|set', async () => {
    const q = uniqueQueueId('cli');
    expect(await json(['push', q, '{"n":1}', '--priority', '2'])).toMatchObject({ success: true });
    expect(await json(['push', q, '{"n":2}', '--dedup-id', 'two'])).toMatchObject({ success: true });
    expect(await json(['push', q, '{"n":2}', '--dedup-id', 'two'])).toMatchObject({ duplicate: true });
    expect(await json(['push', q], '{"n":3}\n{"n":4}\n\n{"n":5}\n')).toEqual({ success: true, count: 3, duplicates: 0 });

    const stats = await json(['stats', q]);
    expect(stats).toMatchObject({ queue_id: q, count: 5, config: { lock_mode: 'exclusive' } });
    expect((await json(['list', '--prefix', q])).queues).toEqual([{ queue_id: q, count: 5, locked: false, paused: false }]);

    expect(await json(['pop', q, '--depth', '2'])).toMatchObject({ items: [{ n: 2 }, { n: 3 }], count: 2 });
    const acked = await json(['pop', q, '--ack', '-n', '10']);
    expect(acked).toMatchObject({ items: [{ n: 4 }, { n: 5 }, { n: 1 }], locked: true });
    expect((await client.queue(q).info()).lock).toBeNull();

    // --wait: a long poll answered by a push made while it waits.
    const waiting = json(['pop', q, '--wait', '10']);
    await pollsWaitingOn(svc, q);
    await client.queue(q).push({ n: 6 });
    expect(await waiting).toMatchObject({ items: [{ n: 6 }] });

    expect(await json(['settings', 'set', q, 'lock_mode=shared', 'max_deliveries=4', `dead_letter_queue=${q}.dlq`])).toMatchObject({
      lock_mode: 'shared',
      max_deliveries: 4,
      dead_letter_queue: `${q}.dlq`,
    });
    expect(await json(['settings', 'get', q])).toMatchObject({ lock_mode: 'shared', max_deliveries: 4 });

    // Plain output, and errors: a non-zero exit, the path called and the error_code on stderr.
    expect((await pushpop(['pop', q])).stdout).toBe('(empty)\n');
    const missing = uniqueQueueId('missing');
    const failed = await pushpop(['settings', 'get', missing]);
    expect(failed).toMatchObject({ code: 1, stdout: '' });
    expect(failed.stderr).toContain(`GET /queue/${missing}/settings: 404 QUEUE_NOT_FOUND`);
    expect((await pushpop(['push', q, '[1]'])).code).not.toBe(0);
  });

  it('every --json output is one JSON document per line, errors included, with a non-zero exit', async () => {
    const q = uniqueQueueId('cli-json');
    const port = await freePort();
    await client.queue(q).push({ n: 0 });
    const errors: [args: string[], code: string, stdin?: string][] = [
      [['push', q, '[1]'], 'INVALID_ARGUMENT'],
      [['push', q, '{"n":1'], 'INVALID_ARGUMENT'],
      [['push', q], 'INVALID_ARGUMENT', '{"n":1}\nnot json\n'],
      [['push', q, '{}', '--priority', 'high'], 'INVALID_ARGUMENT'],
      [['push', q, '{}', '--priority', '100000'], 'VALIDATION_FAILED'],
      [['push'], 'INVALID_ARGUMENT'],
      [['pop', q, '--no-such-flag'], 'INVALID_ARGUMENT'],
      [['no-such-command'], 'INVALID_ARGUMENT'],
      [['pop', 'bad queue id'], 'INVALID_QUEUE_ID'],
      [['peek', uniqueQueueId('missing')], 'QUEUE_NOT_FOUND'],
      [['stats', uniqueQueueId('missing')], 'QUEUE_NOT_FOUND'],
      [['settings', 'get', uniqueQueueId('missing')], 'QUEUE_NOT_FOUND'],
      [['settings', 'set', q, 'lock_mode'], 'INVALID_ARGUMENT'],
      [['settings', 'set', q, 'segment_size=0'], 'VALIDATION_FAILED'],
      [['schedule', 'get', uniqueQueueId('missing')], 'SCHEDULE_NOT_FOUND'],
      [['schedule', 'put', uniqueQueueId('s'), q, 'not cron', '{}'], 'VALIDATION_FAILED'],
      [['--url', `http://127.0.0.1:${port}`, 'list'], 'NETWORK_ERROR'],
    ];
    for (const [args, code, stdin] of errors) {
      const run = await pushpop(['--json', ...args], stdin);
      expect(run.code, args.join(' ')).not.toBe(0);
      expect(run.stderr, args.join(' ')).toBe('');
      const lines = run.stdout.trim().split('\n');
      expect(lines, args.join(' ')).toHaveLength(1);
      expect(JSON.parse(lines[0]), args.join(' ')).toEqual({ error: { status: expect.any(Number), error_code: code, message: expect.any(String) } });
    }
    const refused = await pushpop(['--json', '--url', `http://127.0.0.1:${port}`, 'list']);
    expect(JSON.parse(refused.stdout).error.message).toBe(`cannot reach http://127.0.0.1:${port} (GET /queues): connect ECONNREFUSED 127.0.0.1:${port}`);

    // And every success is JSON too.
    for (const args of [
      ['peek', q],
      ['stats', q],
      ['list', '--prefix', q],
      ['settings', 'get', q],
      ['pop', q, '--ack'],
      ['schedule', 'list'],
    ]) {
      const run = await pushpop(['--json', ...args]);
      expect(run.code, args.join(' ')).toBe(0);
      expect(() => JSON.parse(run.stdout), args.join(' ')).not.toThrow();
    }
  });

  it('peek shows the next items without taking them', async () => {
    const q = uniqueQueueId('cli-peek');
    await client.queue(q).pushBatch([{ item: { n: 1 } }, { item: { n: 2 }, priority: 1 }, { item: { n: 0 }, priority: 0 }]);
    expect(await json(['peek', q, '-n', '2'])).toEqual({
      queue_id: q,
      items: [
        { priority: 0, item: { n: 1 } },
        { priority: 0, item: { n: 0 } },
      ],
      count: 3,
      hidden: 0,
    });
    expect((await pushpop(['peek', q])).stdout).toBe('0\t{"n":1}\n0\t{"n":0}\n1\t{"n":2}\n');
    expect((await client.queue(q).info()).count).toBe(3);
  });

  it('pop --wait waits out a lock another consumer holds (423) and takes the items once it is released', async () => {
    const q = uniqueQueueId('cli-locked');
    await client.queue(q).push({ n: 1 });
    const held = await client.queue(q).pop({ requireAck: true, ttlSeconds: 60 });
    const waiting = json(['pop', q, '--wait', '10']);
    await new Promise((r) => setTimeout(r, 1000));
    await client.queue(q).release(held.lock_id!);
    expect(await waiting).toMatchObject({ items: [{ n: 1 }] });
    // Without --wait the 423 is the answer at once.
    await client.queue(q).push({ n: 2 });
    const again = await client.queue(q).pop({ requireAck: true, ttlSeconds: 60 });
    const refused = await pushpop(['--json', 'pop', q]);
    expect(JSON.parse(refused.stdout)).toMatchObject({ error: { status: 423, error_code: 'QUEUE_LOCKED' } });
    await client.queue(q).acknowledge(again.lock_id!);
  });

  it('schedule put, list, get, delete', async () => {
    const id = uniqueQueueId('cli-schedule');
    const q = uniqueQueueId('cli-schedule-q');
    const made = await json(['schedule', 'put', id, q, '0 6 * * 1-5', '{"report":"sales"}', '--tz', 'Europe/Berlin', '-p', '2']);
    expect(made).toMatchObject({
      schedule_id: id,
      queue_id: q,
      cron: '0 6 * * 1-5',
      timezone: 'Europe/Berlin',
      item: { report: 'sales' },
      priority: 2,
      paused: false,
      last_run_at: null,
    });
    expect(made.next_run_at as number).toBeGreaterThan(Date.now() / 1000);
    expect(await json(['schedule', 'get', id])).toEqual(made);
    expect(((await json(['schedule', 'list'])).schedules as { schedule_id: string }[]).filter((s) => s.schedule_id === id)).toEqual([made]);
    const text = await pushpop(['schedule', 'list']);
    expect(text.stdout).toContain(`${id}\t0 6 * * 1-5\tEurope/Berlin\t-> ${q}\tnext ${new Date((made.next_run_at as number) * 1000).toISOString()}\tlast -`);
    expect(await json(['schedule', 'put', id, q, '* * * * *', '{}', '--paused'])).toMatchObject({ paused: true, next_run_at: null, timezone: 'UTC' });
    const invalid = await pushpop(['schedule', 'put', id, q, 'not cron', '{}']);
    expect(invalid.code).not.toBe(0);
    expect(invalid.stderr).toContain(`PUT /schedules/${id}: 400 VALIDATION_FAILED`);
    expect(await json(['schedule', 'delete', id])).toEqual({ success: true });
    const missing = await pushpop(['--json', 'schedule', 'get', id]);
    expect(missing.code).not.toBe(0);
    expect(JSON.parse(missing.stdout)).toMatchObject({ error: { status: 404, error_code: 'SCHEDULE_NOT_FOUND' } });
  });

  /** A long-running `pushpop` command against the service (consume, say), its output gathered. */
  function startCli(args: string[]): { child: ChildProcess; output: { stdout: string; stderr: string } } {
    const child = spawn(process.execPath, [build.cliJs, ...args], { env: { ...process.env, PUSHPOP_URL: svc.url }, stdio: ['ignore', 'pipe', 'pipe'] });
    const output = { stdout: '', stderr: '' };
    child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
    return { child, output };
  }

  it('consume runs the command per item with the item on stdin: exit 0 acknowledges, non-zero retries after the backoff, then dead-letters', async () => {
    const q = uniqueQueueId('cli-consume');
    await client.queue(q).updateSettings({ max_deliveries: 2, dead_letter_queue: `${q}.dlq` });
    await client.queue(q).pushBatch([{ item: { n: 1 } }, { item: { n: 2, fail: true } }, { item: { n: 3 } }]);
    const out = join(dir, 'consumed.jsonl');
    // The command appends its stdin to a file, and fails for items with "fail".
    const command = `tee -a ${out} | grep -v fail > /dev/null`;
    const { child, output } = startCli(['--json', 'consume', q, '--ttl', '5', '--wait', '1', '--', command]);
    await waitFor(
      'the failing item dead-lettered',
      async () =>
        (
          await client
            .queue(`${q}.dlq`)
            .info()
            .catch(() => ({ count: 0 }))
        ).count === 1,
    );
    await waitFor('the others completed', () => output.stdout.split('\n').filter((l) => l.includes('"completed"')).length === 2);
    child.kill('SIGTERM');
    const code = await new Promise((r) => child.once('exit', r));
    expect(code).toBe(0);
    expect(output.stderr).toBe('');
    const events = output.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { event: string; item?: { n: number }; delivery_count?: number });
    const of = (event: string) => events.filter((e) => e.event === event).map((e) => [e.item?.n, e.delivery_count]);
    expect(of('completed')).toEqual([
      [1, 1],
      [3, 1],
    ]);
    expect(of('retrying')).toEqual([[2, 1]]);
    expect(events.find((e) => e.event === 'retrying')).toMatchObject({ delay_seconds: 1, error: expect.stringContaining('exited with 1') });
    expect(of('failed')).toEqual([[2, 2]]);
    expect(events.find((e) => e.event === 'failed')).toMatchObject({ dead_lettered: true });
    expect(of('dead_lettered')).toEqual([[2, 2]]);
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines).toEqual([{ n: 1 }, { n: 2, fail: true }, { n: 3 }, { n: 2, fail: true }]);
    const info = await client.queue(q).info();
    expect({ count: info.count, lock: info.lock }).toEqual({ count: 0, lock: null });
  });

  it('consume --prefix runs the command per item of the shared queues under the prefix, each event and PUSHPOP_QUEUE naming its queue', async () => {
    const prefix = `${uniqueQueueId('cli-prefix')}:`;
    const queues = [`${prefix}a`, `${prefix}b`];
    for (const q of queues) {
      await client.queue(q).updateSettings({ lock_mode: 'shared' });
      await client.queue(q).pushBatch([1, 2, 3].map((n) => ({ item: { q, n } })));
    }
    const outside = prefix.slice(0, -1);
    await client.queue(outside).push({ q: outside, n: 0 });
    const out = join(dir, 'consumed-prefix.txt');
    const { child, output } = startCli(['--json', 'consume', '--prefix', prefix, '--ttl', '5', '--wait', '1', '--', `echo "$PUSHPOP_QUEUE $(cat)" >> ${out}`]);
    await waitFor('six completed', () => output.stdout.split('\n').filter((l) => l.includes('"completed"')).length === 6);
    child.kill('SIGTERM');
    expect(await new Promise((r) => child.once('exit', r))).toBe(0);
    expect(output.stderr).toBe('');
    const completed = output.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { event: string; queue_id?: string; item?: { q: string; n: number } })
      .filter((e) => e.event === 'completed');
    expect(completed.every((e) => e.queue_id === e.item?.q)).toBe(true);
    expect(completed.map((e) => `${e.item?.q} ${e.item?.n}`).sort()).toEqual(queues.flatMap((q) => [1, 2, 3].map((n) => `${q} ${n}`)));
    const lines = readFileSync(out, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(6);
    for (const line of lines) {
      const [queueId, json] = [line.slice(0, line.indexOf(' ')), line.slice(line.indexOf(' ') + 1)];
      expect((JSON.parse(json) as { q: string }).q).toBe(queueId);
    }
    for (const q of queues) expect((await client.queue(q).info()).count).toBe(0);
    expect((await client.queue(outside).info()).count).toBe(1);
    // Neither a queue nor --prefix: refused.
    const refused = await pushpop(['consume']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('consume needs a queue, or --prefix');
  });

  it('consume refuses a queue together with --prefix, as a usage error naming both', async () => {
    const q = uniqueQueueId('cli-both');
    const prefix = `${q}:`;
    await client.queue(q).push({ n: 1 });
    const usage = await pushpop(['consume', q, '--no-such-flag']);
    expect(usage.code).not.toBe(0);
    for (const args of [
      ['consume', q, '--prefix', prefix, '--', './handler.sh'],
      ['consume', '--prefix', prefix, q, '--', './handler.sh'],
    ]) {
      const refused = await pushpop(args);
      expect(refused, args.join(' ')).toMatchObject({ code: usage.code, stdout: '' });
      expect(refused.stderr, args.join(' ')).toContain(`consume takes a queue or --prefix, not both: got queue ${q} and --prefix ${prefix}`);
      const json = await pushpop(['--json', ...args]);
      expect(json.code, args.join(' ')).toBe(usage.code);
      expect(JSON.parse(json.stdout), args.join(' ')).toEqual({
        error: { status: 0, error_code: 'INVALID_ARGUMENT', message: expect.stringContaining(`got queue ${q} and --prefix ${prefix}`) },
      });
    }
    // Without --prefix a queue comes before the --: after it, the first word is the command's.
    const noQueue = await pushpop(['consume', '--', 'cat']);
    expect(noQueue.code).toBe(usage.code);
    expect(noQueue.stderr).toContain('consume needs a queue, or --prefix');
    expect((await client.queue(q).info()).count).toBe(1);
  });

  it('consume takes every word after -- as the command and its arguments, with a queue and with --prefix', async () => {
    const q = uniqueQueueId('cli-words');
    const prefix = `${uniqueQueueId('cli-words-prefix')}:`;
    await client.queue(q).push({ n: 1 });
    await client.queue(`${prefix}a`).updateSettings({ lock_mode: 'shared' });
    await client.queue(`${prefix}a`).push({ n: 2 });
    const outputs = [join(dir, 'words-queue.jsonl'), join(dir, 'words-prefix.jsonl')];
    // `-a` after the -- is the command's flag, not one of consume's.
    const children = [
      ['consume', q, '--wait', '1', '--', 'tee', '-a', outputs[0]],
      ['consume', '--prefix', prefix, '--wait', '1', '--', 'tee', '-a', outputs[1]],
    ].map((args) => spawn(process.execPath, [build.cliJs, ...args], { env: { ...process.env, PUSHPOP_URL: svc.url }, stdio: ['ignore', 'ignore', 'pipe'] }));
    const stderr = ['', ''];
    children.forEach((child, i) => child.stderr.on('data', (chunk: Buffer) => (stderr[i] += chunk.toString())));
    const written = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8') : '');
    await waitFor('both items handled', () => written(outputs[0]) === '{"n":1}\n' && written(outputs[1]) === '{"n":2}\n');
    await waitFor('both acknowledged', async () => (await client.queue(q).info()).count + (await client.queue(`${prefix}a`).info()).count === 0);
    for (const child of children) child.kill('SIGTERM');
    expect(await Promise.all(children.map((child) => new Promise((r) => child.once('exit', r))))).toEqual([0, 0]);
    expect(stderr[0]).toBe('');
    expect(stderr[1]).toBe(`${prefix}a: done (delivery 1)\n`);
  });

  it('tail prints items as they are pushed', async () => {
    const q = uniqueQueueId('cli-tail');
    const child = spawn(process.execPath, [build.cliJs, '--json', 'tail', q], {
      env: { ...process.env, PUSHPOP_URL: svc.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    await client.queue(q).pushBatch([{ item: { n: 1 } }, { item: { n: 2 } }]);
    await waitFor('two items printed', () => stdout.split('\n').filter(Boolean).length === 2);
    await client.queue(q).push({ n: 3 });
    await waitFor('three items printed', () => stdout.split('\n').filter(Boolean).length === 3);
    child.kill('SIGTERM');
    expect(await new Promise((r) => child.once('exit', r))).toBe(0);
    expect(
      stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line)),
    ).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
  });
});
