import type { FastifyInstance, onRequestHookHandler } from 'fastify';
import Router from 'find-my-way';
import { MethodNotAllowedError } from './errors.js';

/**
 * Answers a known path asked with a method it does not take with 405 METHOD_NOT_ALLOWED and an
 * `Allow` header; an unknown path stays 404.
 *
 * Fastify's router tells only "no route for this method and path", so every route is mirrored,
 * as it is registered (`onRoute`, added at once), into a router of its own built with the same
 * options; the `onRequest` hook returned (the caller adds it, in its place among the others)
 * asks it about the requests Fastify could not route, before any body is read.
 * HEAD is answered wherever GET is (Fastify's `exposeHeadRoutes`) and is not listed in `Allow`.
 */
export function answerMethodNotAllowed(fastify: FastifyInstance, routerOptions: Router.Config<Router.HTTPVersion.V1>): onRequestHookHandler {
  const routes = Router(routerOptions);
  const methods = new Set<Router.HTTPMethod>();
  fastify.addHook('onRoute', (route) => {
    for (const method of [route.method].flat() as Router.HTTPMethod[]) {
      if (method === 'HEAD' || routes.hasRoute(method, route.url)) continue;
      routes.on(method, route.url, () => undefined);
      methods.add(method);
    }
  });
  return (request, _reply, done) => {
    if (!request.is404) return done();
    const allowed = [...methods].filter((method) => findsRoute(routes, method, request.url)).sort();
    done(allowed.length > 0 ? new MethodNotAllowedError(request.method, allowed) : undefined);
  };
}

function findsRoute(routes: Router.Instance<Router.HTTPVersion.V1>, method: Router.HTTPMethod, url: string): boolean {
  try {
    return routes.find(method, url) !== null;
  } catch {
    // A URL the router cannot decode: Fastify answers it 400 itself.
    return false;
  }
}
