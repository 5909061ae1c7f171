// Pushes 10,000 orders: concurrent pushes gathered into push/batch requests.
//   PUSHPOP_URL=http://127.0.0.1:8000 node examples/producer.mjs
import { PushpopClient } from '@pushpop/client';

const client = new PushpopClient();
const producer = client.producer('orders');

const started = Date.now();
const results = await Promise.allSettled(Array.from({ length: 10_000 }, (_, id) => producer.push({ id }, { dedupId: `order-${id}` })));
const failed = results.filter((r) => r.status === 'rejected');
console.log(`pushed ${results.length - failed.length} in ${Date.now() - started} ms, ${failed.length} failed, ${client.requests} requests`);

// One at a time, with a delay and a priority:
await client.queue('orders').push({ id: 'late' }, { priority: 5, delaySeconds: 10 });
const stats = await client.queue('orders').info();
console.log(`orders: ${stats.count} queued, ${stats.delayed} delayed`);
