import { registerDecorator, type ValidationArguments } from 'class-validator';

/** Most headers an item may carry (the kept `traceparent` aside). */
export const MAX_HEADERS = 16;
/** A header name: 1-64 characters of A-Z a-z 0-9 . _ - */
export const HEADER_NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
/** Longest header value, in characters (Unicode code points). */
export const MAX_HEADER_VALUE_CHARACTERS = 1024;

/** Why `value` is not a valid set of item headers, or undefined when it is. */
export function headersProblem(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'must be an object of string values';
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_HEADERS) return `must have at most ${MAX_HEADERS} entries`;
  for (const [name, v] of entries) {
    if (!HEADER_NAME_PATTERN.test(name)) return `name ${JSON.stringify(name.slice(0, 80))} must be 1-64 characters of A-Z a-z 0-9 . _ -`;
    if (typeof v !== 'string') return `.${name} must be a string`;
    // Length in UTF-16 units is at least the length in characters: count the characters only when it might matter.
    if (v.length > MAX_HEADER_VALUE_CHARACTERS && [...v].length > MAX_HEADER_VALUE_CHARACTERS)
      return `.${name} must be at most ${MAX_HEADER_VALUE_CHARACTERS} characters`;
  }
  return undefined;
}

/** The message for a field `field` whose headers break a rule (a problem of {@link headersProblem}). */
export function headersMessage(field: string, problem: string): string {
  return `${field}${problem.startsWith('.') ? problem : ` ${problem}`}`;
}

/**
 * A body field holding item headers (see {@link headersProblem}); the message names the field
 * and the rule broken. The validation pipe shows it a stand-in for an object (headers, like
 * items, never go through class-transformer, which would drop names such as `__proto__`): the
 * service checks the object itself with {@link headersProblem}.
 */
export function IsItemHeaders(): PropertyDecorator {
  return (target: object, propertyName: string | symbol) =>
    registerDecorator({
      name: 'isItemHeaders',
      target: target.constructor,
      propertyName: propertyName as string,
      validator: {
        validate: (value: unknown) => headersProblem(value) === undefined,
        defaultMessage: (args?: ValidationArguments) => headersMessage(args?.property ?? 'headers', headersProblem(args?.value) ?? ''),
      },
    });
}
