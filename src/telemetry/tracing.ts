import type { FastifyInstance } from 'fastify';

/** DI token of the {@link Tracing} in use; not provided at all while tracing is off. */
export const TRACING = Symbol('Tracing');

/** A turn as the runner saw it, for the spans of the operations it carried (times in epoch milliseconds). */
export interface TurnTrace {
  readonly queueId: string;
  /** Per operation of the turn: the trace context it was asked for in (see {@link Tracing.currentContext}). */
  readonly contexts: readonly unknown[];
  readonly start: number;
  readonly end: number;
  readonly ok: boolean;
  /** Attempts the turn took (more than one: it lost the version check, or read a store first). */
  readonly attempts: number;
  /** The turn's write statement (`pushpop_write_turn`), when it ran one. */
  readonly statement?: { readonly start: number; readonly end: number };
}

/**
 * Port: distributed tracing of requests, turns and their statements. Implemented with the
 * OpenTelemetry SDK (`otel-tracing.ts`), which is loaded only when tracing is on; while it is
 * off nothing provides this port and the code that would call it pays one `undefined` check.
 */
export interface Tracing {
  /** The caller's trace context (opaque), to parent spans recorded later on its behalf. */
  currentContext(): unknown;
  /** Records a turn: a span per operation it carried (a child of that operation's context) and a child for its statement. */
  turnFinished(turn: TurnTrace): void;
  /** Links the current request's span to the trace contexts in these items' headers (`traceparent`); JSON texts, undefined: none. */
  linkItems(headers: readonly (string | undefined)[]): void;
  /** Opens a span for every request of an operation (`METHOD /route` → operation name), the request's `traceparent` its parent. */
  traceRequests(fastify: FastifyInstance, operations: ReadonlyMap<string, string>): void;
  /** Sends what is buffered and stops. */
  shutdown(): Promise<void>;
}

/** Epoch milliseconds of a `performance.now()` reading (the times of a {@link TurnTrace}). */
const epochMs = (t: number): number => performance.timeOrigin + t;

/** A {@link TurnTrace} of the operations `batch` (their trace contexts) from `performance.now()` readings: the turn started at `started` and ends now. */
export function turnTrace(
  queueId: string,
  batch: readonly { readonly trace?: unknown }[],
  started: number,
  ok: boolean,
  attempts: number,
  statement?: { readonly start: number; readonly end: number },
): TurnTrace {
  const times = statement ? { statement: { start: epochMs(statement.start), end: epochMs(statement.end) } } : {};
  return { queueId, contexts: batch.map((p) => p.trace), start: epochMs(started), end: epochMs(performance.now()), ok, attempts, ...times };
}

type Env = Readonly<Record<string, string | undefined>>;

const set = (value: string | undefined): boolean => value !== undefined && value.trim() !== '';

/**
 * Whether the standard OpenTelemetry variables ask for traces: `OTEL_EXPORTER_OTLP_ENDPOINT`,
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_TRACES_EXPORTER` set, and neither
 * `OTEL_SDK_DISABLED=true` nor `OTEL_TRACES_EXPORTER=none`.
 */
export function tracingWanted(env: Env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporters = traceExporters(env);
  if (exporters.length > 0) return exporters.some((e) => e !== 'none');
  return set(env.OTEL_EXPORTER_OTLP_ENDPOINT) || set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** `OTEL_TRACES_EXPORTER` as a list (empty: unset). */
export function traceExporters(env: Env): string[] {
  return (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((e) => e.trim().toLowerCase())
    .filter((e) => e !== '');
}

/** For tests: span processors of the caller's instead of the exporters the environment names. */
export interface TracingOptions {
  readonly spanProcessors?: readonly unknown[];
}

/**
 * Starts tracing when {@link tracingWanted} (or span processors are given): the SDK is imported
 * only then, so a service without tracing never loads it. Undefined: tracing is off.
 */
export async function startTracing(env: Env, options: TracingOptions = {}): Promise<Tracing | undefined> {
  if (!options.spanProcessors && !tracingWanted(env)) return undefined;
  const { OtelTracing } = await import('./otel-tracing.js');
  return OtelTracing.start(env, options);
}
