import 'reflect-metadata';
import { DECORATORS } from '@nestjs/swagger';
import { describe, expect, it } from 'vitest';
import { ApiErrors, AUTH_ERRORS, BODY_ERRORS, COMMON_QUEUE_ERRORS, type ErrorCodes, mergeErrors } from './api-errors.decorator.js';

interface Documented {
  description: string;
  headers?: Record<string, unknown>;
  content: {
    'application/json': {
      schema: { allOf?: { $ref?: string; properties?: { error_code: { enum: string[] } } }[]; oneOf?: unknown[] };
      examples: Record<string, { value: Record<string, unknown> }>;
    };
  };
}

/** The responses ApiErrors documents for an operation with these codes, as Nest's Swagger module reads them. */
function documented(...sets: ErrorCodes[]): Record<string, Documented> {
  class Controller {
    operation(): void {}
  }
  const descriptor = Object.getOwnPropertyDescriptor(Controller.prototype, 'operation')!;
  ApiErrors(...sets)(Controller.prototype, 'operation', descriptor);
  return Reflect.getMetadata(DECORATORS.API_RESPONSE, descriptor.value as object) as Record<string, Documented>;
}

describe('ApiErrors', () => {
  it('documents per status one example per code, with that status and code', () => {
    const responses = documented(COMMON_QUEUE_ERRORS, { 404: ['QUEUE_NOT_FOUND'] });
    expect(Object.keys(responses).sort()).toEqual(['400', '401', '403', '404', '429', '503']);
    for (const [status, response] of Object.entries(responses)) {
      const { examples } = response.content['application/json'];
      expect(Object.keys(examples).length, status).toBeGreaterThan(0);
      for (const [code, { value }] of Object.entries(examples)) {
        expect(value, `${status} ${code}`).toMatchObject({ statusCode: Number(status), error_code: code, message: expect.any(String) });
        expect(response.description, `${status} ${code}`).toContain(`\`${code}\``);
      }
    }
    expect(Object.keys(responses['429'].content['application/json'].examples)).toEqual(['QUEUE_BUSY', 'RATE_LIMITED']);
  });

  it('merges the sets status by status, each code once', () => {
    expect(mergeErrors({ 400: ['VALIDATION_FAILED'] }, { 400: ['VALIDATION_FAILED', 'MALFORMED_JSON'], 413: ['PAYLOAD_TOO_LARGE'] })).toEqual({
      400: ['VALIDATION_FAILED', 'MALFORMED_JSON'],
      413: ['PAYLOAD_TOO_LARGE'],
    });
  });

  it('documents the headers their codes come with: Retry-After on 429 and 503, RateLimit-* with RATE_LIMITED, WWW-Authenticate on 401', () => {
    const responses = documented({ 400: ['VALIDATION_FAILED'], 429: ['QUEUE_BUSY'], 503: ['STORE_UNAVAILABLE'] });
    expect(Object.keys(responses['429'].headers ?? {})).toEqual(['Retry-After']);
    expect(Object.keys(responses['503'].headers ?? {})).toEqual(['Retry-After']);
    expect(responses['400'].headers).toBeUndefined();
    const limited = documented({ 401: ['UNAUTHORIZED'], 429: ['RATE_LIMITED'] });
    expect(Object.keys(limited['401'].headers ?? {})).toEqual(['WWW-Authenticate']);
    expect(Object.keys(limited['429'].headers ?? {}).sort()).toEqual(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After']);
  });

  it('every queue operation answers 401 UNAUTHORIZED, 403 FORBIDDEN and 429 RATE_LIMITED besides its own errors', () => {
    for (const [status, codes] of Object.entries(AUTH_ERRORS)) expect(COMMON_QUEUE_ERRORS[Number(status)], status).toEqual(expect.arrayContaining([...codes]));
    const responses = documented(COMMON_QUEUE_ERRORS);
    expect(Object.keys(responses['401'].headers ?? {})).toEqual(['WWW-Authenticate']);
    expect(responses['403'].headers).toBeUndefined();
    expect(Object.keys(responses['429'].headers ?? {}).sort()).toEqual(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Retry-After']);
  });

  it('gives lock errors their body with success: false, told apart by error_code from the plain ones of the same status', () => {
    const responses = documented(COMMON_QUEUE_ERRORS, { 400: ['LOCK_ID_REQUIRED', 'INVALID_LOCK_ID'], 404: ['LOCK_NOT_FOUND'] }, BODY_ERRORS);
    const badRequest = responses['400'].content['application/json'];
    expect(badRequest.schema.oneOf).toEqual([
      {
        allOf: [
          { $ref: '#/components/schemas/ErrorResponseDto' },
          { type: 'object', properties: { error_code: { type: 'string', enum: ['INVALID_QUEUE_ID', 'VALIDATION_FAILED', 'MALFORMED_JSON'] } } },
        ],
      },
      {
        allOf: [
          { $ref: '#/components/schemas/LockErrorResponseDto' },
          { type: 'object', properties: { error_code: { type: 'string', enum: ['LOCK_ID_REQUIRED', 'INVALID_LOCK_ID'] } } },
        ],
      },
    ]);
    expect(badRequest.examples.INVALID_LOCK_ID.value).toEqual({ statusCode: 400, error_code: 'INVALID_LOCK_ID', message: 'Invalid lock_id', success: false });
    expect(badRequest.examples.VALIDATION_FAILED.value).not.toHaveProperty('success');
    expect(responses['404'].content['application/json'].schema.allOf?.[0].$ref).toBe('#/components/schemas/LockErrorResponseDto');
  });

  it('documents the 423 of a locked queue with its lock_expires_at', () => {
    const locked = documented({ 423: ['QUEUE_LOCKED'] })['423'].content['application/json'];
    expect(locked.schema.allOf?.[0].$ref).toBe('#/components/schemas/QueueLockedResponseDto');
    expect(locked.examples.QUEUE_LOCKED.value).toMatchObject({ statusCode: 423, lock_expires_at: expect.any(Number) });
  });

  it('refuses a code under a status it is not answered with', () => {
    expect(() => ApiErrors({ 404: ['QUEUE_BUSY'] })).toThrow('QUEUE_BUSY is not answered with 404');
    expect(() => ApiErrors({ 429: ['QUEUE_BUSY', 'RATE_LIMITED'] })).not.toThrow();
  });
});
