import { plainToInstance, Transform } from 'class-transformer';
import { IsBoolean, IsIn, IsInt, IsNumber, IsOptional, IsString, Matches, Max, Min, validateSync } from 'class-validator';

const toBool = ({ value }: { value: unknown }): unknown => {
  if (typeof value !== 'string') return value;
  const v = value.trim().toLowerCase();
  return v === 'true' || v === '1' ? true : v === 'false' || v === '0' ? false : value;
};

const toInt = ({ value }: { value: unknown }): unknown => {
  if (typeof value !== 'string' || value.trim() === '') return value;
  return /^-?\d+$/.test(value.trim()) ? Number(value) : value;
};

/** A plain decimal such as `5` or `0.5` becomes a number; anything else stays a string for the validator to refuse. */
const toDecimal = ({ value }: { value: unknown }): unknown => {
  if (typeof value !== 'string' || value.trim() === '') return value;
  return /^\d+(\.\d+)?$/.test(value.trim()) ? Number(value) : value;
};

/** The burst allowed when `RATE_LIMIT_BURST` is unset: twice the rate, in whole requests (0 while the limit is off). */
export function defaultRateLimitBurst(ratePerSecond: number): number {
  return ratePerSecond > 0 ? Math.max(1, Math.ceil(2 * ratePerSecond)) : 0;
}

/** Where the embedded cluster goes when the user postgres cannot reach DATA_DIR (run as root). */
export const DEFAULT_EMBEDDED_POSTGRES_ROOT = '/var/lib/pushpop';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'log', 'debug', 'verbose'] as const;
export type LogLevelName = (typeof LOG_LEVELS)[number];

export const LOG_FORMATS = ['text', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/**
 * The service's environment, parsed and validated once at boot. Every variable has a default
 * that makes a zero-config run work (embedded database under `./.data`, port 8000 on loopback).
 */
export class Environment {
  /** HTTP port. */
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(65535)
  PORT = 8000;

  /** Address the HTTP server binds to. */
  @IsString()
  HOST = '127.0.0.1';

  /** PostgreSQL connection string; unset means the embedded PostgreSQL server under DATA_DIR. */
  @IsOptional()
  @IsString()
  DATABASE_URL?: string;

  /**
   * PostgreSQL schema for pushpop's tables (created if missing), so that several services or
   * test runs can share one database; unset uses the server's default (`public`).
   */
  @IsOptional()
  @Matches(/^[a-z_][a-z0-9_]{0,62}$/, { message: 'DATABASE_SCHEMA must be a lower-case PostgreSQL identifier (a-z, 0-9, _)' })
  DATABASE_SCHEMA?: string;

  /** Where the embedded database keeps its files. */
  @IsString()
  DATA_DIR = './.data';

  /**
   * Run as root with a DATA_DIR the user postgres cannot reach (a clone under /root): where the
   * embedded cluster, and if needed a copy of its binaries, live instead (see README).
   */
  @IsString()
  @Matches(/^\//, { message: 'EMBEDDED_POSTGRES_ROOT must be an absolute path' })
  EMBEDDED_POSTGRES_ROOT = DEFAULT_EMBEDDED_POSTGRES_ROOT;

  /** Items per segment, stored with each queue when it is created. */
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(100_000)
  SEGMENT_SIZE = 100;

  /** Full segments kept next to the head before the offloaded range starts (minimum 1). */
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  BUFFER_SEGMENTS = 1;

  /**
   * Offloaded segments read ahead of the turns that bring them back, per priority being popped
   * (see `SegmentReadAhead`): a drained deep queue then never waits for the store in a turn, for
   * this many more segments in memory; 0: none.
   */
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(100)
  READ_AHEAD_SEGMENTS = 2;

  /**
   * A segment brought back from the offload store is written as one packed row, once no process
   * of the previous release (which reads only rows) is connected to the database (see
   * `storage/packing-gate.ts`); false: a row per item always, as that release writes them.
   */
  @Transform(toBool)
  @IsBoolean({ message: 'PACKED_SEGMENTS must be true or false' })
  PACKED_SEGMENTS = true;

  /**
   * While transactions that called `pushpop_enqueue` keep committing, a carriage starts at most
   * this often (see `EnqueueCarrier`): what commits meanwhile goes in one carriage, one push per
   * queue, and the carriages leave the cores to the committing transactions (measured in
   * docs/performance.md, "Enqueue from SQL"); 0: carry again as soon as a carriage ends.
   */
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(1000)
  ENQUEUE_GATHER_MS = 100;

  /** Highest priority number accepted (0 is popped first). */
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(1_000_000)
  MAX_PRIORITY = 255;

  /** Largest serialized item in bytes. */
  @Transform(toInt)
  @IsInt()
  @Min(2)
  @Max(64 * 1024 * 1024)
  MAX_ITEM_BYTES = 262_144;

  /**
   * Origins (`scheme://host[:port]`, comma-separated) whose browser pages may call the API
   * across origins; unset, no cross-origin call is allowed (no CORS headers at all).
   */
  @IsOptional()
  @Matches(/^https?:\/\/[^\s,/]+(\s*,\s*https?:\/\/[^\s,/]+)*$/, {
    message: 'CORS_ORIGINS must be origins such as https://console.example.com, separated by commas',
  })
  CORS_ORIGINS?: string;

  /**
   * API keys, comma-separated `<name>:<key>:<scope>[+<scope>…]` entries (README "Security");
   * unset (and no API_KEYS_FILE), every route is open. Parsed by `loadApiKeys`, whose messages
   * never contain a key.
   */
  @IsOptional()
  @IsString()
  API_KEYS?: string;

  /** A file of API keys, one entry per line (`#` comments and blank lines ignored); instead of API_KEYS. */
  @IsOptional()
  @IsString()
  API_KEYS_FILE?: string;

  /** Serve a non-loopback HOST without API keys (refused otherwise). */
  @Transform(toBool)
  @IsBoolean({ message: 'ALLOW_UNAUTHENTICATED must be true or false' })
  ALLOW_UNAUTHENTICATED = false;

  /** `/metrics` without a key even when keys are configured (for a scraper inside a private network). */
  @Transform(toBool)
  @IsBoolean({ message: 'METRICS_PUBLIC must be true or false' })
  METRICS_PUBLIC = false;

  /** Largest request body in bytes. */
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  @Max(256 * 1024 * 1024)
  MAX_BODY_BYTES = 1_048_576;

  /** An actor idle this long is dropped from memory; its state stays in the database. */
  @Transform(toInt)
  @IsInt()
  @Min(100)
  ACTOR_IDLE_TIMEOUT_MS = 60_000;

  /** Live locks one queue in shared lock mode may have; past it a pop with ack gets 429 QUEUE_BUSY. */
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  MAX_LOCKS_PER_QUEUE = 10_000;

  /** Operations allowed to wait for one queue's turn; past it callers get 429 QUEUE_BUSY. */
  @Transform(toInt)
  @IsInt()
  @Min(1)
  MAX_PENDING_PER_QUEUE = 1000;

  /**
   * Long polls (pops with `wait_seconds`) one process keeps waiting at most; past it a pop with
   * `wait_seconds` answers at once, as if it had none. 0 turns long polling off.
   */
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(1_000_000)
  MAX_WAITING_POLLS = 10_000;

  /** How often expired acknowledgement locks are swept on queues nobody calls. */
  @Transform(toInt)
  @IsInt()
  @Min(50)
  @Max(60_000)
  LOCK_SWEEP_INTERVAL_MS = 1000;

  /**
   * How often due delayed items are made visible on queues nobody calls (and long polls waiting
   * on them answered); unset, `LOCK_SWEEP_INTERVAL_MS`, which set both before this setting existed.
   */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(50)
  @Max(60_000)
  DELAY_SWEEP_INTERVAL_MS?: number;

  /**
   * How often due schedules are looked for (one index probe for all schedules) and fired. A
   * firing is pushed within this long of its time, plus the push; keep it under 1000.
   */
  @Transform(toInt)
  @IsInt()
  @Min(50)
  @Max(60_000)
  SCHEDULE_SWEEP_INTERVAL_MS = 500;

  /** How often expired dedup ids are deleted (housekeeping only: an expired id is never read as live). */
  @Transform(toInt)
  @IsInt()
  @Min(50)
  @Max(3_600_000)
  DEDUP_SWEEP_INTERVAL_MS = 10_000;

  /**
   * How long a push's `dedup_id` is remembered per queue, in seconds (1 to 86400): another push
   * with it within this time is answered `duplicate: true` and enqueues nothing.
   */
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(86_400)
  DEDUP_WINDOW_SECONDS = 300;

  /** Database connection pool size. */
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(200)
  DB_POOL_SIZE = 10;

  /**
   * Requests per second each client may make on average (a token bucket per API key name, or
   * per client address without keys); 0 turns rate limiting off. Fractions such as 0.5 allowed.
   */
  @Transform(toDecimal)
  @IsNumber({ allowNaN: false, allowInfinity: false, maxDecimalPlaces: 3 })
  @Min(0)
  @Max(1_000_000)
  RATE_LIMIT_PER_SECOND = 0;

  /** Requests a client may make at once (the bucket's size); unset, twice `RATE_LIMIT_PER_SECOND` (see {@link defaultRateLimitBurst}). */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  RATE_LIMIT_BURST?: number;

  /** The least severe log lines written (`debug` adds a line per answered request). */
  @IsIn(LOG_LEVELS)
  LOG_LEVEL: LogLevelName = 'log';

  /**
   * `text`: Nest's human-readable lines; `json`: one JSON object per line on standard output
   * (time, level, message, context, and for a request's lines its request id, queue id and key name).
   */
  @IsIn(LOG_FORMATS)
  LOG_FORMAT: LogFormat = 'text';

  /**
   * Processes serving the port (node:cluster): 1 runs the service in this process; more fork that
   * many workers on one listening socket, each with its own actors and pool of DB_POOL_SIZE
   * connections (queues are safe across processes). Needs DATABASE_URL: the embedded database
   * belongs to one process.
   */
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(64)
  WORKERS = 1;

  /**
   * OpenTelemetry tracing (docs/operations.md, "Tracing"): the OTLP/HTTP receiver traces go to
   * (`<endpoint>/v1/traces`); setting it turns tracing on. Unset with `OTEL_TRACES_EXPORTER`
   * unset too, tracing is off and the SDK is never loaded. The SDK reads the other standard
   * variables itself (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `_HEADERS`, `_TIMEOUT`,
   * `_COMPRESSION`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`,
   * `OTEL_SDK_DISABLED`).
   */
  @IsOptional()
  @Matches(/^https?:\/\/\S+$/, { message: 'OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL' })
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;

  /** Trace exporters, comma-separated: `otlp` (OTLP over HTTP, JSON), `console`, `none`; setting it turns tracing on, `none` keeps it off. */
  @IsOptional()
  @Matches(/^\s*(otlp|console|none)\s*(,\s*(otlp|console|none)\s*)*$/, { message: 'OTEL_TRACES_EXPORTER must list otlp, console or none' })
  OTEL_TRACES_EXPORTER?: string;

  /** The traces' `service.name` (default `pushpop`). */
  @IsOptional()
  @IsString()
  OTEL_SERVICE_NAME?: string;
}

export class EnvironmentError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid environment:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'EnvironmentError';
  }
}

/** Parses `env` into an {@link Environment}, throwing one error that names every bad variable. */
export function parseEnvironment(env: Record<string, string | undefined>): Environment {
  const known = Object.keys(new Environment()).concat(
    'DATABASE_URL',
    'DATABASE_SCHEMA',
    'CORS_ORIGINS',
    'API_KEYS',
    'API_KEYS_FILE',
    'RATE_LIMIT_BURST',
    'DELAY_SWEEP_INTERVAL_MS',
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    'OTEL_TRACES_EXPORTER',
    'OTEL_SERVICE_NAME',
  );
  const input: Record<string, string> = {};
  for (const key of known) {
    const value = env[key];
    if (value !== undefined && value !== '') input[key] = value;
  }
  const parsed = plainToInstance(Environment, input, { exposeDefaultValues: true });
  const errors = validateSync(parsed, { whitelist: false, forbidUnknownValues: false });
  if (errors.length > 0) {
    throw new EnvironmentError(
      errors.map((e) => `${e.property}=${e.property === 'API_KEYS' ? '…' : JSON.stringify(e.value)}: ${Object.values(e.constraints ?? {}).join(', ')}`),
    );
  }
  if (parsed.WORKERS > 1 && !parsed.DATABASE_URL) {
    throw new EnvironmentError([`WORKERS=${parsed.WORKERS}: several workers need DATABASE_URL (the embedded database belongs to one process)`]);
  }
  parsed.RATE_LIMIT_BURST ??= defaultRateLimitBurst(parsed.RATE_LIMIT_PER_SECOND);
  parsed.DELAY_SWEEP_INTERVAL_MS ??= parsed.LOCK_SWEEP_INTERVAL_MS;
  return parsed;
}
