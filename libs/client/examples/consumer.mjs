// A worker: handles orders, 8 at a time, until Ctrl-C or SIGTERM (then drains for up to 30 s).
//   PUSHPOP_URL=http://127.0.0.1:8000 node examples/consumer.mjs
import { PushpopClient, RetryLater, UnrecoverableError } from '@pushpop/client';

const client = new PushpopClient(); // PUSHPOP_URL, PUSHPOP_API_KEY

// Shared: every item under a lock of its own, acknowledged or given back on its own. What keeps
// failing goes to orders.dead after 5 attempts (retried after 1 s, 2 s, 4 s, 8 s).
await client.queue('orders').updateSettings({ lock_mode: 'shared', dead_letter_queue: 'orders.dead', max_deliveries: 5 });

const consumer = client.consume(
  'orders',
  async ({ item, deliveryCount, signal }) => {
    console.log(`order ${JSON.stringify(item)} (delivery ${deliveryCount})`);
    if (typeof item.id !== 'number') throw new UnrecoverableError('an order without an id'); // dead-lettered
    const response = await fetch('https://example.com/', { signal }); // stop when the consumer gives up on us
    if (response.status === 429) throw new RetryLater(60); // back on the queue in a minute
    if (!response.ok) throw new Error(`HTTP ${response.status}`); // retried with backoff
  },
  { concurrency: 8, ttlSeconds: 30 },
);
consumer.on('retrying', ({ item, delaySeconds, error }) => console.warn(`order ${JSON.stringify(item)}: ${error.message}, again in ${delaySeconds} s`));
consumer.on('deadLettered', ({ item, deadLetterQueue }) => console.warn(`order ${JSON.stringify(item)} moved to ${deadLetterQueue}`));
consumer.on('error', (error) => console.error('consumer:', error.message));

for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => void consumer.close());
