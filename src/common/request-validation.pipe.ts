import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { ValidationFailedError } from './errors.js';
import { UnsupportedBody } from './request-body.parser.js';

/** Nesting allowed in a request body outside its items (items have their own, larger limit). */
const MAX_BODY_DEPTH = 16;
/** Query strings remembered valid per DTO class; past it the oldest is forgotten. */
const MAX_REMEMBERED_QUERIES = 1000;

type Primitive = string | number | boolean | null | undefined;
const isPrimitive = (value: unknown): value is Primitive => value === null || (typeof value !== 'object' && typeof value !== 'function');

/** Whether `value` nests objects/arrays deeper than `limit` levels; iterative, so any depth is safe. */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (current === null || typeof current !== 'object') continue;
    if (depth > limit) return true;
    for (const child of Array.isArray(current) ? current : Object.values(current)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}

function messages(errors: ValidationError[], parent = ''): string[] {
  const out: string[] = [];
  for (const error of errors) {
    const path = parent ? `${parent}.${error.property}` : error.property;
    for (const message of Object.values(error.constraints ?? {})) out.push(parent ? message.replace(error.property, path) : message);
    out.push(...messages(error.children ?? [], path));
  }
  return out;
}

type Holder = Record<string, unknown>;

/** The places in a body where items sit: `item`, and `item` of each entry of `items`. */
function itemHolders(body: unknown): Holder[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return [];
  const holders: Holder[] = [];
  const root = body as Holder;
  if ('item' in root) holders.push(root);
  if (Array.isArray(root.items)) {
    for (const entry of root.items) if (entry !== null && typeof entry === 'object' && !Array.isArray(entry) && 'item' in entry) holders.push(entry as Holder);
  }
  return holders;
}

/**
 * The global validation pipe: class-validator DTO rules (unknown fields refused), with every
 * error answered as 400 VALIDATION_FAILED. It is also where a route that takes a body refuses
 * one it cannot read (415 UNSUPPORTED_MEDIA_TYPE) and a JSON `null` (400): only here is it
 * known which routes read a body, so routes that take none (pop, GET) ignore any.
 *
 * Items are arbitrary JSON and must come back exactly as pushed, so they never go through
 * class-transformer or Nest's prototype-key stripping (which would drop keys such as
 * `__proto__` and recurse without bound on deep input): each item is swapped for an empty
 * stand-in of the same kind while the DTO is validated and put back afterwards. The item's own
 * checks (object, depth, size) are the service's.
 */
export class RequestValidationPipe extends ValidationPipe {
  /**
   * Query DTOs already validated, per class, by the query's JSON. Consumers send the same few
   * query strings over and over (`?wait_seconds=20`, `?depth=10&require_ack=true`), and
   * class-transformer and class-validator cost a pop about a tenth of its CPU (profile of the
   * long-poll benchmark); a query seen before gets a copy of its DTO instead. Only queries that
   * passed, and whose DTO holds nothing but primitive values (so a shallow copy is a full one).
   */
  private readonly validQueries = new Map<unknown, Map<string, object>>();

  constructor() {
    super({
      whitelist: true,
      forbidNonWhitelisted: true,
      transform: true,
      transformOptions: { enableImplicitConversion: false },
      exceptionFactory: (errors) => new ValidationFailedError(messages(errors).join('; ') || 'request is invalid'),
    });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'query' && metadata.metatype) return this.transformQuery(value, metadata);
    if (metadata.type !== 'body') return super.transform(value, metadata);
    if (value instanceof UnsupportedBody) throw value.toError();
    if (value === null) throw new ValidationFailedError('request body must be a JSON object, not null');
    const holders = itemHolders(value);
    const items = holders.map((holder) => holder.item);
    holders.forEach((holder) => {
      const item = holder.item;
      if (item !== null && typeof item === 'object') holder.item = Array.isArray(item) ? [] : {};
    });
    try {
      if (nestsDeeperThan(value, MAX_BODY_DEPTH)) throw new ValidationFailedError(`request body nests deeper than ${MAX_BODY_DEPTH} levels outside its items`);
      const result = await super.transform(value, metadata);
      // Put the items back into the validated DTO, in the same places.
      itemHolders(result).forEach((holder, i) => (holder.item = items[i]));
      return result;
    } finally {
      holders.forEach((holder, i) => (holder.item = items[i]));
    }
  }

  private async transformQuery(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    // A query string parses to strings (and arrays of them for repeated keys): its JSON is exact.
    const key = value !== null && typeof value === 'object' ? JSON.stringify(value) : undefined;
    let remembered = this.validQueries.get(metadata.metatype);
    const known = key === undefined ? undefined : remembered?.get(key);
    if (known) return copyOf(known);
    const result: unknown = await super.transform(value, metadata);
    if (key !== undefined && result !== null && typeof result === 'object' && Object.values(result).every(isPrimitive)) {
      if (!remembered) this.validQueries.set(metadata.metatype, (remembered = new Map()));
      if (remembered.size >= MAX_REMEMBERED_QUERIES) remembered.delete(remembered.keys().next().value!);
      remembered.set(key, copyOf(result));
    }
    return result;
  }
}

/** A shallow copy with the same prototype (the DTO's class). */
function copyOf<T extends object>(dto: T): T {
  return Object.assign(Object.create(Object.getPrototypeOf(dto) as object | null) as T, dto);
}
