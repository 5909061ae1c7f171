import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { ValidationFailedError } from './errors.js';
import { UnsupportedBody } from './request-body.parser.js';

/** Nesting allowed in a request body outside its items (items have their own, larger limit). */
const MAX_BODY_DEPTH = 16;
/** Queries and body shapes remembered valid per DTO class; past it the oldest is forgotten. */
const MAX_REMEMBERED = 1000;

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
   * DTOs already validated, per class, by the JSON of what was validated: a query, or a body
   * with its items stood in for (see {@link transform}). Clients send the same few query strings
   * and body shapes over and over (`?wait_seconds=20`, `{"item": …, "priority": 1}`), and
   * class-transformer and class-validator cost a request about a tenth of its CPU (profiles of
   * the push and long-poll benchmarks); one seen before gets a copy of its DTO instead. Only
   * what passed is remembered, and only DTOs holding nothing but primitive values besides an
   * item's stand-in (so that a shallow copy is a full one): not a batch's entries.
   */
  private readonly remembered = new Map<unknown, Map<string, object>>();

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
    // A query string parses to strings (and arrays of them for repeated keys): its JSON is exact.
    if (metadata.type === 'query' && metadata.metatype) return this.validateOnce(value, metadata, () => super.transform(value, metadata));
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
      const result = await this.validateOnce(value, metadata, () => {
        if (nestsDeeperThan(value, MAX_BODY_DEPTH))
          throw new ValidationFailedError(`request body nests deeper than ${MAX_BODY_DEPTH} levels outside its items`);
        return super.transform(value, metadata);
      });
      // Put the items back into the validated DTO, in the same places.
      itemHolders(result).forEach((holder, i) => (holder.item = items[i]));
      return result;
    } finally {
      holders.forEach((holder, i) => (holder.item = items[i]));
    }
  }

  /** `validate()`'s DTO, or a copy of the one it gave for the same value before (see {@link remembered}). */
  private async validateOnce(value: unknown, metadata: ArgumentMetadata, validate: () => Promise<unknown>): Promise<unknown> {
    // A batch is never remembered: no key is made for it.
    const key = isFlat(value) ? JSON.stringify(value) : undefined;
    let known = this.remembered.get(metadata.metatype);
    const dto = key === undefined ? undefined : known?.get(key);
    if (dto) return copyOf(dto);
    const result = await validate();
    if (key !== undefined && isFlat(result)) {
      if (!known) this.remembered.set(metadata.metatype, (known = new Map()));
      if (known.size >= MAX_REMEMBERED) known.delete(known.keys().next().value!);
      known.set(key, copyOf(result));
    }
    return result;
  }
}

/** An object whose fields are all primitive values, but for an item's stand-in. */
function isFlat(value: unknown): value is object {
  return value !== null && typeof value === 'object' && Object.entries(value).every(([field, v]) => isPrimitive(v) || field === 'item');
}

/** A shallow copy with the same prototype (the DTO's class). */
function copyOf<T extends object>(dto: T): T {
  return Object.assign(Object.create(Object.getPrototypeOf(dto) as object | null) as T, dto);
}
