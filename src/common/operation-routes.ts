import { RequestMethod } from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import type { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { COUNTED_OPERATIONS } from './operations.decorator.js';

/**
 * The queue operations' routes: `METHOD /route/pattern` (as Fastify's `routeOptions` give them)
 * → operation name (the handler's name, the OpenAPI operationId), for the handlers of
 * controllers marked `@CountedOperations()`. Read once, from the controllers' metadata.
 */
export function operationRoutes(discovery: DiscoveryService, scanner: MetadataScanner, reflector: Reflector): Map<string, string> {
  const operations = new Map<string, string>();
  for (const wrapper of discovery.getControllers()) {
    const controller = wrapper.metatype as (new (...args: never[]) => unknown) | undefined;
    if (!controller || !reflector.get<boolean>(COUNTED_OPERATIONS, controller)) continue;
    const base = (Reflect.getMetadata(PATH_METADATA, controller) as string | undefined) ?? '';
    const prototype = controller.prototype as Record<string, object>;
    for (const name of scanner.getAllMethodNames(prototype)) {
      const handler = prototype[name];
      const path = Reflect.getMetadata(PATH_METADATA, handler) as string | undefined;
      const method = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod | undefined;
      if (path === undefined || method === undefined) continue;
      const url = `/${[base, path]
        .map((p) => p.replace(/^\/+|\/+$/g, ''))
        .filter(Boolean)
        .join('/')}`;
      operations.set(`${RequestMethod[method]} ${url}`, name);
    }
  }
  return operations;
}
