// A worker: handles orders, 8 at a time, until Ctrl-C (then drains for up to 30 s).
//   PUSHPOP_URL=http://127.0.0.1:8000 node examples/consumer.mjs
import { PushpopClient, RetryLater } from '@pushpop/client';

const client = new PushpopClient(); // PUSHPOP_URL, PUSHPOP_API_KEY

const consumer = client.consume(
  'orders',
  async ({ item, deliveryCount, signal }) => {
    console.log(`order ${JSON.stringify(item)} (delivery ${deliveryCount})`);
    const response = await fetch('https://example.com/', { signal }); // stop when the consumer gives up on us
    if (response.status === 429) throw new RetryLater(60); // back on the queue in a minute
  },
  { concurrency: 8, ttlSeconds: 30 },
);
consumer.on('error', (error) => console.error('consumer:', error.message));
consumer.on('lockLost', ({ items }) => console.warn(`lost the lock of ${items.length} item(s); they will be delivered again`));

process.once('SIGINT', () => {
  void consumer.close().then(() => process.exit(0));
});
