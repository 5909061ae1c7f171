import type { ErrorResponse } from '@pushpop/api-client';

// The console talks to the service that served it, through the generated client only; the
// client of the current session (with its API key) comes from `useApi()` in session.tsx.

/** A failed call as the console shows it: the API's own `message` and `error_code`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

interface ClientResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * Awaits an openapi-fetch call and returns its 2xx body, or throws an {@link ApiError} built
 * from the error body the service sent (never a generic "request failed").
 */
export async function call<T>(request: Promise<ClientResult<T>>): Promise<T> {
  let result: ClientResult<T>;
  try {
    result = await request;
  } catch (error) {
    if (isAbort(error)) throw error;
    throw new ApiError(0, 'NETWORK_ERROR', `The service did not answer (${error instanceof Error ? error.message : String(error)})`);
  }
  if (result.error !== undefined || !result.response.ok) {
    const { status, statusText } = result.response;
    const body = result.error;
    if (body !== null && typeof body === 'object') {
      const { error_code, message } = body as Partial<ErrorResponse>;
      throw new ApiError(status, error_code ?? `HTTP_${status}`, message ?? (statusText || `HTTP ${status}`));
    }
    throw new ApiError(status, `HTTP_${status}`, typeof body === 'string' && body ? body.slice(0, 300) : statusText || `HTTP ${status}`);
  }
  return result.data as T;
}

export function isAbort(error: unknown): boolean {
  return error instanceof DOMException && error.name === 'AbortError';
}

export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  return new ApiError(0, 'CLIENT_ERROR', error instanceof Error ? error.message : String(error));
}
