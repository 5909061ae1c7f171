// The items every scenario pushes and the queues it pushes them to.

import { Buffer } from 'node:buffer';
import { CONFIG } from './config.mjs';

let seq = 0;
const ITEM_HEAD = '{"seq":"';
const ITEM_MIDDLE = '","kind":"order.created","customer":"customer-000042","sku":"SKU-7731-XL","quantity":3,"price_cents":129900,"note":"';
const ITEM_TAIL = '"}';
const NOTE = 'x'.repeat(CONFIG.itemBytes - (ITEM_HEAD.length + 12 + ITEM_MIDDLE.length + ITEM_TAIL.length));
/** A JSON object of exactly CONFIG.itemBytes bytes carrying a sequence number unique in the run. */
export function itemJson() {
  seq += 1;
  return `${ITEM_HEAD}${String(seq).padStart(12, '0')}${ITEM_MIDDLE}${NOTE}${ITEM_TAIL}`;
}
if (Buffer.byteLength(itemJson()) !== CONFIG.itemBytes || typeof JSON.parse(itemJson()).seq !== 'string')
  throw new Error('item template is not the configured size');
export const randomPriority = () => Math.floor(Math.random() * CONFIG.priorities);
export const pushBody = (priority = randomPriority()) => `{"item":${itemJson()},"priority":${priority}}`;

export const QUEUE_IDS = Array.from({ length: CONFIG.queues }, (_, i) => `bench-${i}`);
export const HOT_QUEUE = 'bench-hot';
export const SHALLOW_QUEUE = 'bench-shallow';
export const DEEP_QUEUE = 'bench-deep';
/** The delayed scenario: two queues of BENCH_SHALLOW_ITEMS visible items, one of them with BENCH_DELAYED_ITEMS delayed ones too. */
export const PLAIN_QUEUE = 'bench-plain';
export const DELAYED_QUEUE = 'bench-delayed';
/** The longest delay there is: the delayed items stay delayed through the whole run (unless it lasts longer). */
export const BENCH_DELAY_SECONDS = 900;
export const randomQueue = () => QUEUE_IDS[Math.floor(Math.random() * QUEUE_IDS.length)];
