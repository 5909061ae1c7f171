import { maxHeaderSize } from 'node:http';
import { Logger, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { AppModule } from './app.module.js';
import { authenticationHooks } from './auth/authentication.hook.js';
import { API_KEY_SCHEME, BEARER_SCHEME } from './auth/scopes.decorator.js';
import { AllExceptionsFilter } from './common/all-exceptions.filter.js';
import { RequestLogLine, requestLogFields, serviceLogger } from './common/logging.js';
import { answerMethodNotAllowed } from './common/method-not-allowed.hook.js';
import { declareRequestId, echoRequestId, requestId } from './common/request-id.js';
import { registerBodyParsers } from './common/request-body.parser.js';
import { RequestValidationPipe } from './common/request-validation.pipe.js';
import { AppConfig } from './config/app-config.js';
import type { Environment } from './config/environment.js';
import { rateLimitHook } from './auth/rate-limit.hook.js';
import type { Tracing } from './telemetry/tracing.js';

/**
 * Fastify's router, as the service uses it. Route parameters are judged by the pipes (a queue id
 * past 200 characters is 400 INVALID_QUEUE_ID), never cut off by the router, whose default
 * limit of 100 characters would answer a valid queue id 414; no URL is longer than a header.
 */
const ROUTER_OPTIONS = { maxParamLength: maxHeaderSize };

/**
 * A URL Fastify's router cannot decode is refused before any route or hook runs, with Fastify's
 * own body; sent to the app's error handler instead, it gets the contract's body from the filter.
 */
function routerErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  request.server.errorHandler(error, request, reply);
}

/**
 * Applies what every pushpop app needs: body parsing and limits, CORS, API keys, rate limits,
 * 405 answers, validation, the error filter. Call before the app is initialised: routes are
 * mirrored as they are registered.
 */
export function configureApp(app: NestFastifyApplication): void {
  const config = app.get(AppConfig);
  const env = config.env;
  const fastify = app.getHttpAdapter().getInstance();
  registerBodyParsers(fastify, env.MAX_BODY_BYTES);
  const methodNotAllowed = answerMethodNotAllowed(fastify, ROUTER_OPTIONS);
  app.useGlobalPipes(new RequestValidationPipe());
  app.useGlobalFilters(new AllExceptionsFilter());
  // Cross-origin calls only from the origins an operator listed (the console itself is same-origin).
  if (env.CORS_ORIGINS) app.enableCors({ origin: env.CORS_ORIGINS.split(',').map((o) => o.trim()), maxAge: 600 });
  // Before the request gate: its refusals carry the request id too.
  fastify.addHook('onRequest', echoRequestId);
  if (env.LOG_LEVEL === 'debug' || env.LOG_LEVEL === 'verbose') logAnswers(fastify);
  const auth = authenticationHooks(config);
  const rateLimit = rateLimitHook(env);
  // The request gate: onRequest hooks, run in the order added, before any body is read. One
  // plugin, registered after CORS (whose headers a refusal must carry), not encapsulated:
  // 1. who is calling (the API key's name and scopes, if it is known);
  // 2. the rate limit, by key name (else address), so that refusals below are limited too;
  // 3. 401/403 for what the key may not do;
  // 4. 405 for a known path asked with another method.
  void fastify.register(
    fastifyPlugin(
      async (gate: FastifyInstance) => {
        if (auth) gate.addHook('onRequest', auth.identify);
        if (rateLimit) gate.addHook('onRequest', rateLimit);
        if (auth) gate.addHook('onRequest', auth.authorise);
        gate.addHook('onRequest', methodNotAllowed);
      },
      { name: 'pushpop-request-gate' },
    ),
  );
}

/**
 * A debug line per answered request. Only added at LOG_LEVEL debug or verbose: at the default
 * level the hot routes pay nothing for logging (errors are logged by the error filter).
 */
function logAnswers(fastify: FastifyInstance): void {
  const logger = new Logger('HTTP');
  fastify.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    logger.debug(new RequestLogLine(`${request.method} ${request.url} ${reply.statusCode} ${reply.elapsedTime.toFixed(1)} ms`, requestLogFields(request)));
    done();
  });
}

/** Recursively sorts object keys, so the document serialises the same way every time. */
function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Record<string, unknown>)[key]);
  return out;
}

/** The OpenAPI document as committed: sorted keys, two-space indent, final newline. */
export function stableJson(document: OpenAPIObject): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

/** The OpenAPI document of the service, keys sorted (the same object is served and committed). */
export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('pushpop')
    .setDescription('Priority queues where every queue id is a virtual actor, stored in fixed-size segments on PostgreSQL.')
    .setVersion('0.1.0')
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        description:
          'An API key (README "Security"), as `Authorization: Bearer <key>`. Needed when the service has keys configured; each operation lists the scopes that let a key in under `x-pushpop-scopes`.',
      },
      BEARER_SCHEME,
    )
    .addApiKey({ type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'The same API key, as `X-API-Key: <key>`.' }, API_KEY_SCHEME)
    .setLicense('MIT', 'https://spdx.org/licenses/MIT.html')
    // Relative: the service that serves this document (as Swagger UI assumes without a server).
    .addServer('/', 'The service that serves this document')
    .build();
  const document = SwaggerModule.createDocument(app, config, {
    operationIdFactory: (_controllerKey: string, methodKey: string) => methodKey,
  });
  declareRequestId(document);
  return sortKeys(document) as OpenAPIObject;
}

/**
 * Creates the configured app (not yet listening). `tracing`: traces its requests (see
 * `startTracing`); the app stops it when it closes.
 */
export async function createApp(
  overrides: Partial<Record<keyof Environment, string>> = {},
  withDocs = true,
  tracing?: Tracing,
): Promise<NestFastifyApplication> {
  const module = AppModule.forRoot(overrides, tracing);
  const level = overrides.LOG_LEVEL ?? process.env.LOG_LEVEL ?? 'log';
  const format = overrides.LOG_FORMAT ?? process.env.LOG_FORMAT;
  const app = await NestFactory.create<NestFastifyApplication>(
    module,
    new FastifyAdapter({
      routerOptions: ROUTER_OPTIONS,
      frameworkErrors: routerErrors,
      // While shutting down, requests already on an open connection are served (with
      // `Connection: close`) rather than answered with Fastify's own 503 body: the pool stays open
      // until the server has drained, and every answer keeps the contract's shape.
      return503OnClosing: false,
      // The caller's X-Request-Id when it is acceptable, else a new one (sent back by echoRequestId).
      requestIdHeader: false,
      genReqId: requestId,
    }),
    {
      bodyParser: false,
      logger: serviceLogger(level, format),
    },
  );
  configureApp(app);
  if (withDocs) {
    const document = buildOpenApiDocument(app);
    SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'openapi.json', swaggerOptions: { showExtensions: true } });
  }
  return app;
}
