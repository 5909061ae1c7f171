import { DEFAULT_CONTROLS } from '../support/controls.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildService, startChildService, type ChildService, type ServiceBuild } from '../support/child-service.js';
import { answer, range, seededRandom, testSeed, until, within } from '../support/queue-helpers.js';
import { databaseKind, makeDataDir, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * Durability across restarts: a clean close and start on the same data, and a SIGKILL of a
 * `node dist/main.js` child process. Items are `{p, s}`: priority and a sequence number per
 * priority, so the expected pop order is known exactly.
 */
interface Item {
  p: number;
  s: number;
}

const seed = testSeed();
const where = `(seed ${seed}, ${databaseKind})`;

/** The queue as the contract says it must be: per priority a FIFO list; pops take the lowest priority first. */
class QueueModel {
  readonly lists = new Map<number, Item[]>();
  private readonly next = new Map<number, number>();

  make(p: number): Item {
    const s = this.next.get(p) ?? 0;
    this.next.set(p, s + 1);
    return { p, s };
  }

  pushed(item: Item): void {
    if (!this.lists.has(item.p)) this.lists.set(item.p, []);
    this.lists.get(item.p)!.push(item);
  }

  pop(depth: number): Item[] {
    const out: Item[] = [];
    for (const p of [...this.lists.keys()].sort((a, b) => a - b)) {
      const list = this.lists.get(p)!;
      while (out.length < depth && list.length > 0) out.push(list.shift()!);
      if (list.length === 0) this.lists.delete(p);
    }
    return out;
  }

  get count(): number {
    let n = 0;
    for (const l of this.lists.values()) n += l.length;
    return n;
  }
}

type Http = TestService['http'];

/** Pushes `items` as a mix of single pushes and batches; every answer must be 200. */
async function pushAll(http: Http, q: string, model: QueueModel, items: Item[], rnd: ReturnType<typeof seededRandom>): Promise<void> {
  for (let i = 0; i < items.length;) {
    const n = rnd.next() < 0.5 ? 1 : rnd.int(2, 12);
    const chunk = items.slice(i, i + n);
    const res =
      chunk.length === 1
        ? await answer(http.post(`/queue/${q}/push`).send({ item: chunk[0], priority: chunk[0].p }))
        : await answer(http.post(`/queue/${q}/push/batch`).send({ items: chunk.map((item) => ({ item, priority: item.p })) }));
    expect(res.status, `push ${JSON.stringify(chunk)}: ${JSON.stringify(res.body)}`).toBe(200);
    for (const item of chunk) model.pushed(item);
    i += chunk.length;
  }
}

/** Pops `total` items in pops of random depth, each answer compared with the model. */
async function popAndCompare(http: Http, q: string, model: QueueModel, total: number, rnd: ReturnType<typeof seededRandom>, label: string): Promise<void> {
  let popped = 0;
  while (popped < total) {
    const depth = Math.min(rnd.int(1, 9), total - popped);
    const res = await answer(http.post(`/queue/${q}/pop?depth=${depth}`));
    expect(res.status, `${label}: ${JSON.stringify(res.body)}`).toBe(200);
    expect(res.body.items, `${label}: pop depth ${depth} after ${popped} ${where}`).toEqual(model.pop(depth));
    popped += depth;
  }
}

/** Pops everything with depth 100; returns the items in pop order. */
async function popAll(http: Http, q: string): Promise<Item[]> {
  const out: Item[] = [];
  for (let i = 0; i < 100; i++) {
    const res = await answer(http.post(`/queue/${q}/pop?depth=100`));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    if (res.body.count === 0) return out;
    out.push(...(res.body.items as Item[]));
  }
  throw new Error(`${q} not empty after 100 pops`);
}

/** `counts` items per priority, in a shuffled order, numbered per priority by the model. */
function makeItems(model: QueueModel, rnd: ReturnType<typeof seededRandom>, counts: [number, number][]): Item[] {
  const priorities = counts.flatMap(([p, n]) => range(n).map(() => p));
  for (let i = priorities.length - 1; i > 0; i--) {
    const j = rnd.int(0, i);
    [priorities[i], priorities[j]] = [priorities[j], priorities[i]];
  }
  return priorities.map((p) => model.make(p));
}

describe('restart', () => {
  // The child-process test needs a build (~10-20 s): start it now, it runs while the first test does.
  let building: Promise<ServiceBuild> | undefined;
  beforeAll(() => {
    building = buildService();
    building.catch(() => undefined);
  });
  afterAll(async () => {
    // Also when the child-process test was filtered out.
    (await building?.catch(() => undefined))?.remove();
  }, 240_000);

  it('close and start again on the same data: nothing lost, order kept, GET /queue the same', async () => {
    const rnd = seededRandom(seed);
    const model = new QueueModel();
    const q = uniqueQueueId('restart');
    let svc = await startService({ env: { SEGMENT_SIZE: '10' } });
    const dataDir = svc.dataDir;
    try {
      await pushAll(
        svc.http,
        q,
        model,
        makeItems(model, rnd, [
          [0, 40],
          [1, 20],
          [2, 15],
        ]),
        rnd,
      );
      await popAndCompare(svc.http, q, model, 12, rnd, 'before restart');
      // More pushes after the pops, so head and tail positions are both away from 0.
      await pushAll(
        svc.http,
        q,
        model,
        makeItems(model, rnd, [
          [0, 3],
          [1, 2],
          [3, 2],
        ]),
        rnd,
      );

      const before = await answer(svc.http.get(`/queue/${q}`));
      expect(before.status).toBe(200);
      expect(before.body.count).toBe(model.count);
      expect(before.body.config).toEqual({
        segment_size: 10,
        buffer_segments: expect.any(Number),
        lock_mode: 'exclusive',
        max_deliveries: null,
        dead_letter_queue: null,
        ...DEFAULT_CONTROLS,
      });
      const metaBefore = await answer(svc.http.get(`/queue/${q}/state/metadata`));
      expect(metaBefore.status).toBe(200);

      // A second queue with every control set: they hold across the restart (a paused queue stays paused).
      const controlled = uniqueQueueId('restart-controls');
      const controls = {
        paused: true,
        retry_delay_seconds: 7,
        retry_backoff: 'fixed',
        retry_delay_max_seconds: 60,
        max_in_flight: 3,
        max_pops_per_second: 2.5,
      };
      expect((await answer(svc.http.put(`/queue/${controlled}/settings`).send(controls))).status).toBe(200);
      expect((await answer(svc.http.post(`/queue/${controlled}/push`).send({ item: { c: 1 } }))).status).toBe(200);

      await svc.close();
      // A different SEGMENT_SIZE now: it applies to new queues only, the queue keeps its 10.
      svc = await startService({ dataDir, env: { SEGMENT_SIZE: '7' } });

      expect((await answer(svc.http.get(`/queue/${controlled}/settings`))).body).toMatchObject(controls);
      expect((await answer(svc.http.post(`/queue/${controlled}/pop`))).body).toEqual({ items: [], count: 0, paused: true });

      const after = await answer(svc.http.get(`/queue/${q}`));
      expect(after.status).toBe(200);
      expect(after.body, `GET /queue after restart ${where}`).toEqual(before.body);
      expect((await answer(svc.http.get(`/queue/${q}/state/metadata`))).body).toEqual(metaBefore.body);

      // The tails continue where they were (positions survive), then everything comes out in order.
      await pushAll(
        svc.http,
        q,
        model,
        makeItems(model, rnd, [
          [0, 13],
          [2, 4],
        ]),
        rnd,
      );
      await popAndCompare(svc.http, q, model, 20, rnd, 'after restart');
      const rest = await popAll(svc.http, q);
      expect(rest, `rest after restart ${where}`).toEqual(model.pop(Infinity));
      const empty = await answer(svc.http.get(`/queue/${q}`));
      expect(empty.status === 404 || empty.body.count === 0, JSON.stringify(empty.body)).toBe(true);
    } finally {
      await within(svc.close(), 15_000, undefined);
      removeDataDir(dataDir);
    }
  });

  describe('hard stop: SIGKILL of the built service (node main.js) in a child process', () => {
    const dataDir = makeDataDir();
    const children: ChildService[] = [];
    let build: ServiceBuild | undefined;
    const start = async (): Promise<ChildService> => {
      const child = await startChildService({ build: build!, dataDir, env: { SEGMENT_SIZE: '10' } });
      children.push(child);
      return child;
    };

    beforeAll(async () => {
      build = await building;
    }, 240_000);

    afterAll(async () => {
      for (const child of children) await child.kill('SIGKILL');
      removeDataDir(dataDir);
    });

    it('acknowledged pushes survive SIGKILL, idle and in the middle of concurrent pushes; the data dir opens again', async () => {
      const rnd = seededRandom(seed + 1);
      const model = new QueueModel();
      const q = uniqueQueueId('sigkill');

      // 1. Items over three priorities and several segments, some popped; then SIGKILL while idle.
      let svc = await start();
      await pushAll(
        svc.http,
        q,
        model,
        makeItems(model, rnd, [
          [0, 30],
          [1, 15],
          [2, 12],
        ]),
        rnd,
      );
      await popAndCompare(svc.http, q, model, 9, rnd, 'before kill');
      const before = await answer(svc.http.get(`/queue/${q}`));
      expect(before.status).toBe(200);
      expect(await svc.kill('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });

      svc = await start();
      const after = await answer(svc.http.get(`/queue/${q}`));
      expect(after.body, `GET /queue after SIGKILL ${where}\n${svc.output()}`).toEqual(before.body);

      // 2. SIGKILL while three sequential pushers (one per priority) are in full flight.
      const acked = new Map<number, Item[]>([
        [0, []],
        [1, []],
        [2, []],
      ]);
      const inFlight = new Map<number, Item | undefined>();
      let killed = false;
      const pushers = [0, 1, 2].map(async (p) => {
        for (let i = 0; i < 1000 && !killed; i++) {
          const item = model.make(p);
          inFlight.set(p, item);
          const res = await answer(svc.http.post(`/queue/${q}/push`).send({ item, priority: p }), 5000);
          if (res.status === 200) acked.get(p)!.push(item);
          else {
            // Only the kill may fail a push (connection reset / no answer).
            expect(killed || res.status === 0, `push ${JSON.stringify(item)}: ${res.status} ${JSON.stringify(res.body)}`).toBe(true);
            return;
          }
          inFlight.set(p, undefined);
        }
      });
      const enough = await until(() => [...acked.values()].reduce((n, l) => n + l.length, 0) >= 24, 30_000);
      expect(enough, 'pushers made progress before the kill').toBe(true);
      const kill = svc.kill('SIGKILL');
      killed = true;
      expect(await kill).toEqual({ code: null, signal: 'SIGKILL' });
      await Promise.all(pushers);

      svc = await start();
      // Expected: what was queued before, then per priority every acknowledged push, plus maybe
      // the one that was in flight (it may have committed before the kill, unacknowledged).
      const popped = await popAll(svc.http, q);
      const byPriority = new Map<number, Item[]>();
      for (const item of popped) {
        if (!byPriority.has(item.p)) byPriority.set(item.p, []);
        byPriority.get(item.p)!.push(item);
      }
      expect(
        popped.map((i) => i.p),
        `priorities in pop order ${where}`,
      ).toEqual([...popped.map((i) => i.p)].sort((a, b) => a - b));
      for (const p of [0, 1, 2]) {
        const expected = [...(model.lists.get(p) ?? []), ...acked.get(p)!];
        const got = byPriority.get(p) ?? [];
        const extra = inFlight.get(p);
        const allowed = [expected, ...(extra ? [[...expected, extra]] : [])];
        expect(allowed, `priority ${p}: popped ${JSON.stringify(got)} ${where}\nlog:\n${svc.output()}`).toContainEqual(got);
      }

      // 3. The database still works normally after two crashes.
      const res = await answer(svc.http.post(`/queue/${q}/push`).send({ item: { p: 9, s: 0 }, priority: 9 }));
      expect(res.status).toBe(200);
      expect((await answer(svc.http.post(`/queue/${q}/pop`))).body.items).toEqual([{ p: 9, s: 0 }]);

      // 4. SIGTERM shuts down cleanly and promptly.
      svc.child.kill('SIGTERM');
      const exit = await within(svc.exited, 15_000, undefined);
      expect(exit, `no exit 0 within 15 s of SIGTERM\n${svc.output()}`).toEqual({ code: 0, signal: null });
    });
  });
});
