import type { FastifyReply } from 'fastify';
import type { PopQueryDto } from './dto/pop-query.dto.js';
import { serializePopAnswer } from './pop-body.js';
import type { PopOptions } from './queue.service.js';

/** A pop's options from its query, defaults filled in (a queue pop's and a fair pop's alike). */
export function popOptions(query: PopQueryDto): PopOptions {
  return {
    depth: query.depth ?? 1,
    requireAck: query.require_ack ?? false,
    lockPerItem: query.lock_per_item ?? false,
    includeHeaders: query.include_headers ?? false,
    ttlSeconds: query.ttl_seconds ?? 30,
    waitSeconds: query.wait_seconds ?? 0,
  };
}

/**
 * Makes `reply` send the items of a pop's answer, or of the pop an acknowledgement made after it
 * (`next`), as the JSON text they were stored as (see `popAnswer`; a reply with a serializer of
 * its own gets no Content-Type from Fastify, so it is set here).
 */
export function sendsStoredItems(reply: FastifyReply): void {
  reply.serializer(serializePopAnswer).type('application/json; charset=utf-8');
}

/**
 * Answers a pop on `reply`, its items as stored (see {@link sendsStoredItems}). A long poll gets a signal that is set when its client goes away, so that it stops
 * waiting and takes no item nobody would receive.
 */
export async function answerPop<T>(reply: FastifyReply, options: PopOptions, pop: (clientGone?: AbortSignal) => Promise<T>): Promise<T> {
  sendsStoredItems(reply);
  if (options.waitSeconds === 0) return pop();
  const clientGone = new AbortController();
  const onClose = (): void => {
    if (!reply.raw.writableEnded) clientGone.abort();
  };
  reply.raw.once('close', onClose);
  try {
    return await pop(clientGone.signal);
  } finally {
    reply.raw.off('close', onClose);
  }
}
