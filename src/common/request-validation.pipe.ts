import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { getMetadataStorage, ValidationTypes } from 'class-validator';
import { ValidationFailedError } from './errors.js';
import { UnsupportedBody } from './request-body.parser.js';

/** Nesting allowed in a request body outside its items (items have their own, larger limit). */
const MAX_BODY_DEPTH = 16;
/** Queries and body shapes remembered valid per DTO class; past it the oldest is forgotten. */
const MAX_REMEMBERED = 1000;
/**
 * Entry shapes of one batch not seen before beyond which the batch is validated whole, as the
 * first of its length is, and none of them is remembered: entries that all differ (a
 * `dedup_id` each) would only push the known shapes out.
 */
const MAX_NEW_ENTRY_SHAPES = 16;

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

/** A JSON object (not an array, not null). */
const isPlainObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

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
   * item's stand-in and nested DTOs of primitive values (`next`), so that the copy is a full
   * one: not a batch's entries.
   */
  private readonly remembered = new Map<unknown, Map<string, object>>();
  /**
   * Entries of batches (`items`) already validated, per batch DTO class, by the JSON of the
   * entry with its item stood in for: their DTOs, copied for each entry of a later batch.
   */
  private readonly rememberedEntries = new Map<unknown, Map<string, object>>();

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
    // Headers are kept away too (names such as `__proto__` are ordinary header names); the service checks them.
    const headers = holders.map((holder) => holder.headers);
    holders.forEach((holder) => {
      const item = holder.item;
      if (item !== null && typeof item === 'object') holder.item = Array.isArray(item) ? [] : {};
      if (isPlainObject(holder.headers)) holder.headers = {};
    });
    try {
      const validate = (): Promise<unknown> => {
        if (nestsDeeperThan(value, MAX_BODY_DEPTH))
          throw new ValidationFailedError(`request body nests deeper than ${MAX_BODY_DEPTH} levels outside its items`);
        return super.transform(value, metadata);
      };
      const result = (await this.validateBatchOnce(value, metadata, validate)) ?? (await this.validateOnce(value, metadata, validate));
      // Put the items (and headers) back into the validated DTO, in the same places.
      itemHolders(result).forEach((holder, i) => {
        holder.item = items[i];
        if (isPlainObject(headers[i])) holder.headers = headers[i];
      });
      return result;
    } finally {
      holders.forEach((holder, i) => {
        holder.item = items[i];
        if (isPlainObject(headers[i])) holder.headers = headers[i];
      });
    }
  }

  /**
   * A batch body (`items`, its entries flat once their items are stood in for) validated shape
   * by shape: class-transformer and class-validator cost a batch about 15 KB of garbage per
   * entry, most of what a bulk load allocates (and what grew the heap it leaves behind), while
   * the entries of a batch mostly share a few shapes (`{"item": …, "priority": 0}`).
   *
   * Whether a batch is valid depends on its fields, the length of `items` and each entry alone.
   * The first batch of a length (with the same other fields) is validated whole, by `validate`;
   * after that, a batch of that length whose entries all have shapes validated before gets a
   * DTO of copies without any validation, and one with a few new shapes has a batch of one
   * entry per new shape validated. Anything refused is validated whole again, so that errors
   * name the entries as always (`items.3.priority …`). Undefined: not such a batch, or too many
   * new shapes (see {@link MAX_NEW_ENTRY_SHAPES}); the caller validates it as any body.
   */
  private async validateBatchOnce(value: unknown, metadata: ArgumentMetadata, validate: () => Promise<unknown>): Promise<object | undefined> {
    const keys = batchEntryKeys(value);
    if (!keys) return undefined;
    const body = value as Holder;
    const entries = body.items as unknown[];
    let known = this.rememberedEntries.get(metadata.metatype);
    if (!known) this.rememberedEntries.set(metadata.metatype, (known = new Map()));
    // This batch's entry DTOs by shape: those known, and those validated now.
    const dtos = new Map<string, object>();
    const fresh: string[] = [];
    for (const k of keys) {
      if (dtos.has(k) || fresh.includes(k)) continue;
      const dto = known.get(k);
      if (dto) dtos.set(k, dto);
      else if (fresh.length === MAX_NEW_ENTRY_SHAPES) return undefined;
      else fresh.push(k);
    }
    const outerKey = `batch:${JSON.stringify({ ...body, items: entries.length })}`;
    const outer = this.remembered.get(metadata.metatype)?.get(outerKey);
    if (!outer) {
      const result = await validate();
      if (!isBatch(result)) return result as object;
      const template = copyOf(result);
      template.items = [];
      remember(this.remembered, metadata.metatype, outerKey, template);
      learn(known, keys, result.items, fresh);
      return result;
    }
    if (fresh.length > 0) {
      let checked: unknown;
      try {
        checked = await super.transform({ ...body, items: fresh.map((k) => entries[keys.indexOf(k)]) }, metadata);
      } catch {
        // Refused: the whole batch is validated, for errors that name its entries.
        return (await validate()) as object;
      }
      if (!isBatch(checked)) return (await validate()) as object;
      fresh.forEach((k, i) => dtos.set(k, checked.items[i] as object));
      learn(known, fresh, checked.items, fresh);
    }
    const dto = copyOf(outer) as Holder;
    dto.items = keys.map((k) => copyOf(dtos.get(k)!));
    return dto;
  }

  /**
   * `validate()`'s DTO, or a copy of the one it gave for the same value before (see
   * {@link remembered}). Fields any string passes and lists of distinct strings (see
   * {@link fieldKinds}) are compared by kind only (a string; a list of so many), and the copy takes
   * this value's: an acknowledgement names a new `lock_id` each time, a batch acknowledgement new
   * `lock_ids`.
   */
  private async validateOnce(value: unknown, metadata: ArgumentMetadata, validate: () => Promise<unknown>): Promise<unknown> {
    const kinds = this.fieldKinds(metadata.metatype);
    const holder = value as Holder;
    const lists = value !== null && typeof value === 'object' ? kinds.lists.filter((field) => isDistinctStrings(holder[field])) : [];
    // A batch is never remembered: no key is made for it.
    const flat = isFlat(value, lists);
    const free = flat ? kinds.free.filter((field) => typeof holder[field] === 'string') : [];
    const key = flat ? keyOf(holder, free, lists) : undefined;
    const dto = key === undefined ? undefined : this.remembered.get(metadata.metatype)?.get(key);
    if (dto) {
      const copy = copyOf(dto) as Holder;
      for (const field of free) copy[field] = holder[field];
      for (const field of lists) copy[field] = [...(holder[field] as string[])];
      return copy;
    }
    const result = await validate();
    if (key !== undefined && isFlat(result, lists)) remember(this.remembered, metadata.metatype, key, copyOf(result));
    return result;
  }

  /** Per DTO class, its fields by what their rules look at (see {@link fieldKinds}). */
  private readonly kinds = new Map<unknown, FieldKinds>();

  /**
   * The fields of a DTO class whose rules do not look at what their strings say: `free`, whose
   * only rule is `@Allow()` (`lock_id`, checked by the service): whatever string they hold, the
   * body is valid or not, and transformed, as with any other; and `lists`, whose rules are only
   * of an array's length, its entries being strings and their being distinct (`lock_ids`): any
   * list of as many distinct strings passes or fails alike. Read from class-validator's own
   * metadata, so a rule added to such a field (a pattern, a length per entry) takes it out.
   */
  private fieldKinds(metatype: unknown): FieldKinds {
    let kinds = this.kinds.get(metatype);
    if (kinds) return kinds;
    const rules = typeof metatype === 'function' ? getMetadataStorage().getTargetValidationMetadatas(metatype, '', true, false) : [];
    const byField = new Map<string, { onlyAllow: boolean; onlyList: boolean }>();
    for (const rule of rules) {
      const field = byField.get(rule.propertyName) ?? { onlyAllow: true, onlyList: true };
      field.onlyAllow &&= rule.type === ValidationTypes.WHITELIST;
      field.onlyList &&= isListRule(rule);
      byField.set(rule.propertyName, field);
    }
    kinds = {
      free: [...byField].filter(([, f]) => f.onlyAllow).map(([field]) => field),
      lists: [...byField].filter(([, f]) => f.onlyList).map(([field]) => field),
    };
    this.kinds.set(metatype, kinds);
    return kinds;
  }
}

/** A rule of a DTO's field, as class-validator keeps it. */
type ValidationMetadata = ReturnType<ReturnType<typeof getMetadataStorage>['getTargetValidationMetadatas']>[number];

interface FieldKinds {
  readonly free: readonly string[];
  readonly lists: readonly string[];
}

/** Rules of an array's being one and of its length. */
const LENGTH_RULES = new Set(['isArray', 'arrayMinSize', 'arrayMaxSize']);

/**
 * Whether a rule's outcome for an array of distinct strings depends on its length only: one of
 * {@link LENGTH_RULES}, distinct entries (by value: no `identifier`), or entries that are strings.
 */
function isListRule(rule: ValidationMetadata): boolean {
  if (rule.type !== ValidationTypes.CUSTOM_VALIDATION || rule.groups?.length || rule.always) return false;
  if (rule.name === 'isString') return rule.each === true;
  if (rule.each === true) return false;
  if (rule.name === 'arrayUnique') return ((rule.constraints ?? []) as unknown[]).every((c) => c === undefined);
  return rule.name !== undefined && LENGTH_RULES.has(rule.name);
}

/** An array of strings, no two the same. */
function isDistinctStrings(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === 'string') && new Set(value).size === value.length;
}

/**
 * What {@link RequestValidationPipe.validateOnce} compares: the value's JSON without its free
 * fields and with each list's length for the list, and which fields those were.
 */
function keyOf(value: Holder, free: readonly string[], lists: readonly string[]): string {
  if (free.length === 0 && lists.length === 0) return JSON.stringify(value);
  // Field by field rather than a copy without the free fields: deleting fields of an object makes every later access to it slow.
  let key = `${free.join(',')}|${lists.join(',')}|`;
  for (const field of Object.keys(value)) {
    if (lists.includes(field)) key += `${JSON.stringify(field)}:#${(value[field] as unknown[]).length},`;
    else if (!free.includes(field)) key += `${JSON.stringify(field)}:${JSON.stringify(value[field])},`;
  }
  return key;
}

/** The JSON of each entry of a batch body's `items` whose other fields are primitive values, when every entry is flat (see {@link isFlat}). */
function batchEntryKeys(value: unknown): string[] | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const { items } = value as Holder;
  if (!Array.isArray(items) || items.length === 0) return undefined;
  if (!Object.entries(value).every(([field, v]) => field === 'items' || isPrimitive(v))) return undefined;
  const keys: string[] = [];
  for (const entry of items) {
    if (!isFlat(entry) || Array.isArray(entry)) return undefined;
    keys.push(JSON.stringify(entry));
  }
  return keys;
}

/**
 * An object whose fields are all primitive values (but for an item's stand-in and the fields of
 * `lists`), or objects of primitive values (a nested DTO such as `next`).
 */
function isFlat(value: unknown, lists: readonly string[] = []): value is object {
  return (
    value !== null &&
    typeof value === 'object' &&
    Object.entries(value).every(
      ([field, v]) => isPrimitive(v) || field === 'item' || lists.includes(field) || (isPlainObject(v) && Object.values(v).every(isPrimitive)),
    )
  );
}

/** Adds to a per-class memory, forgetting the oldest entry past {@link MAX_REMEMBERED}. */
function remember(memory: Map<unknown, Map<string, object>>, metatype: unknown, key: string, dto: object): void {
  let known = memory.get(metatype);
  if (!known) memory.set(metatype, (known = new Map()));
  if (known.size >= MAX_REMEMBERED) known.delete(known.keys().next().value!);
  known.set(key, dto);
}

/** Remembers, copied, the DTOs of entries of the shapes in `fresh` (entry `i` of `dtos` has the shape `keys[i]`) that hold primitive values only. */
function learn(known: Map<string, object>, keys: readonly string[], dtos: readonly unknown[], fresh: readonly string[]): void {
  const wanted = new Set(fresh);
  keys.forEach((k, i) => {
    const dto = dtos[i];
    if (!wanted.delete(k) || !isFlat(dto)) return;
    if (known.size >= MAX_REMEMBERED) known.delete(known.keys().next().value!);
    known.set(k, copyOf(dto));
  });
}

/** A DTO with an `items` array. */
function isBatch(value: unknown): value is Holder & { items: unknown[] } {
  return value !== null && typeof value === 'object' && Array.isArray((value as Holder).items);
}

/** A copy with the same prototype (the DTO's class), and so are its nested DTOs (see {@link isFlat}): nothing of it is shared with the original but an item's stand-in. */
function copyOf<T extends object>(dto: T): T {
  const copy = Object.assign(Object.create(Object.getPrototypeOf(dto) as object | null) as T, dto) as Holder;
  for (const field of Object.keys(copy)) {
    const v = copy[field];
    if (field !== 'item' && isPlainObject(v)) copy[field] = copyOf(v);
  }
  return copy as T;
}
