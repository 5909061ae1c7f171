import { inspect } from 'node:util';
import type { LoggerService } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { pino, type Level, type Logger as Pino } from 'pino';
import { LOG_LEVELS, type LogLevelName } from '../config/environment.js';

/**
 * What a log line may say about the request it belongs to. Never a key or a token: the key's
 * name only (the request's `principal`), never a header's value other than the request id.
 */
export interface RequestLogFields {
  request_id: string;
  method: string;
  url: string;
  queue_id?: string;
  key_name?: string;
}

/** The fields of `request` for its log lines. */
export function requestLogFields(request: FastifyRequest): RequestLogFields {
  const params = request.params as { queue_id?: unknown } | undefined;
  // The principal the authentication hook set (auth/principal.ts), read by shape: common/ does not import auth/.
  const principal = (request as { principal?: { name: string } }).principal;
  const fields: RequestLogFields = { request_id: request.id, method: request.method, url: request.url };
  if (typeof params?.queue_id === 'string') fields.queue_id = params.queue_id;
  if (principal) fields.key_name = principal.name;
  return fields;
}

/**
 * A log message about a request. Give it to a Nest `Logger` like a string: the JSON logger
 * writes its fields as fields of the line, the human-readable one (Nest's console logger, which
 * prints objects with `util.inspect`) prints the message with the fields in brackets.
 */
export class RequestLogLine {
  constructor(
    readonly message: string,
    readonly fields: RequestLogFields,
  ) {}

  toString(): string {
    const { request_id, queue_id, key_name } = this.fields;
    return `${this.message} [request ${request_id}${queue_id === undefined ? '' : `, queue ${queue_id}`}${key_name === undefined ? '' : `, key ${key_name}`}]`;
  }

  [inspect.custom](): string {
    return this.toString();
  }
}

/** Nest's levels as pino's. */
const PINO_LEVELS: Record<LogLevelName, Level> = { fatal: 'fatal', error: 'error', warn: 'warn', log: 'info', debug: 'debug', verbose: 'trace' };

/**
 * Nest's logger interface over pino: one JSON object per line on standard output, with `time`
 * (ISO 8601), `level` (pino's names: `info` for Nest's `log`, `trace` for `verbose`), `message`,
 * `context` (the Nest logger's name), for errors `stack`, and for {@link RequestLogLine}s the
 * request's fields. Every log line of the service (Nest's startup lines, sweeps, errors) goes
 * through it once it is the app's logger.
 */
export class JsonLogger implements LoggerService {
  private readonly pino: Pino;

  constructor(level: LogLevelName, destination: NodeJS.WritableStream | number = 1) {
    this.pino = pino(
      {
        level: PINO_LEVELS[level],
        base: { pid: process.pid },
        messageKey: 'message',
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }) },
      },
      typeof destination === 'number' ? pino.destination({ fd: destination, sync: true }) : destination,
    );
  }

  /** Whether lines of `level` are written (to skip building a line nobody reads). */
  isEnabled(level: LogLevelName): boolean {
    return this.pino.isLevelEnabled(PINO_LEVELS[level]);
  }

  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params, true);
  }
  error(message: unknown, ...params: unknown[]): void {
    this.write('error', message, params, true);
  }
  warn(message: unknown, ...params: unknown[]): void {
    this.write('warn', message, params, false);
  }
  log(message: unknown, ...params: unknown[]): void {
    this.write('info', message, params, false);
  }
  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params, false);
  }
  verbose(message: unknown, ...params: unknown[]): void {
    this.write('trace', message, params, false);
  }

  /**
   * Nest calls `(message, context)`, and for errors `(message, stack, context)` (stack possibly
   * undefined): a last string parameter is the context, a first one of an error the stack.
   */
  private write(level: Level, message: unknown, params: unknown[], withStack: boolean): void {
    if (!this.pino.isLevelEnabled(level)) return;
    const rest = [...params];
    const fields: Record<string, unknown> = {};
    if (rest.length > 0 && typeof rest.at(-1) === 'string') fields.context = rest.pop();
    if (withStack && rest.length > 0 && (typeof rest[0] === 'string' || rest[0] === undefined)) {
      const stack = rest.shift();
      if (stack) fields.stack = stack;
    }
    let text: string;
    if (message instanceof RequestLogLine) {
      Object.assign(fields, message.fields);
      text = message.message;
    } else if (message instanceof Error) {
      text = message.message;
      fields.stack ??= message.stack;
    } else {
      text = typeof message === 'string' ? message : inspect(message, { breakLength: Infinity });
    }
    if (rest.length > 0) fields.details = rest.map((p) => (typeof p === 'string' ? p : inspect(p, { breakLength: Infinity })));
    this.pino[level](fields, text);
  }
}

/**
 * The service's logger for `LOG_LEVEL` and `LOG_FORMAT`, as Nest takes it: JSON lines with
 * `json`, else the levels Nest's own human-readable logger writes; undefined for a level it
 * does not know (the environment's validation reports it).
 */
export function serviceLogger(level: string, format: string | undefined): LoggerService | LogLevelName[] | undefined {
  const index = LOG_LEVELS.indexOf(level as LogLevelName);
  if (index < 0) return undefined;
  return format === 'json' ? new JsonLogger(level as LogLevelName) : LOG_LEVELS.slice(0, index + 1);
}
