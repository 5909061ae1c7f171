import { Transform } from 'class-transformer';
import { ValidateIf } from 'class-validator';

/**
 * An optional body field that, when present, must be valid. Unlike `@IsOptional()` it refuses
 * `null`: a JSON null is not an integer, and taking it for "absent" would accept what the
 * OpenAPI document says is wrong.
 */
export const IsOmittable = (): PropertyDecorator => ValidateIf((_object: object, value: unknown) => value !== undefined);

/**
 * A query parameter holding an integer in plain decimal (`16`, `-1`). Anything else (`0x10`,
 * `1e1`, ` 5`, an empty value) stays a string and fails `@IsInt()`; `Number()` alone would read
 * `0x10` as 16 and an empty value as 0.
 */
export const QueryInt = (): PropertyDecorator =>
  Transform(({ value }: { value: unknown }) => (typeof value === 'string' && /^-?\d{1,15}$/.test(value) ? Number(value) : value));
