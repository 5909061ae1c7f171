import type { CallOptions, PushpopClient } from './client.js';

/**
 * What the service at the client's address supports beyond the third version of its contract,
 * read from its OpenAPI document (`GET /openapi.json`, always open). The Consumer uses these to
 * pick how it pops and settles; everything the third version has (headers, release delays) is
 * assumed.
 */
export interface Capabilities {
  /** `pop` takes `lock_per_item`: one pop of depth N gives N locks of one item each (shared queues). */
  lockPerItem: boolean;
  /** `acknowledge/batch` and `release/batch`: many locks settled in one request. */
  batchLocks: boolean;
  /** `release` takes `dead_letter: true`: an item goes to the dead-letter queue on purpose. */
  deadLetterRelease: boolean;
  /** `acknowledge` takes `next`: acknowledge, then pop the next item, in one request. */
  acknowledgeNext: boolean;
}

/** The third version of the contract: what is assumed when the document cannot be read. */
export const BASE_CAPABILITIES: Readonly<Capabilities> = Object.freeze({
  lockPerItem: false,
  batchLocks: false,
  deadLetterRelease: false,
  acknowledgeNext: false,
});

interface OpenApiDocument {
  paths?: Record<string, Record<string, { parameters?: { name?: string }[]; requestBody?: { content?: Record<string, { schema?: Schema }> } }>>;
  components?: { schemas?: Record<string, Schema> };
}
interface Schema {
  $ref?: string;
  properties?: Record<string, unknown>;
  allOf?: Schema[];
}

/** Reads the service's capabilities from its OpenAPI document; the third version's when it cannot be read. */
export async function readCapabilities(client: PushpopClient, options: CallOptions = {}): Promise<Capabilities> {
  let document: OpenApiDocument;
  try {
    document = await client.call<OpenApiDocument>({ method: 'GET', path: '/openapi.json', ...options });
  } catch {
    return { ...BASE_CAPABILITIES };
  }
  return capabilitiesOf(document);
}

/** The capabilities an OpenAPI document describes. */
export function capabilitiesOf(document: unknown): Capabilities {
  const doc = (typeof document === 'object' && document !== null ? document : {}) as OpenApiDocument;
  const paths = doc.paths ?? {};
  const schemas = doc.components?.schemas ?? {};
  const resolve = (schema: Schema | undefined, depth = 0): Schema[] => {
    if (!schema || depth > 5) return [];
    if (schema.$ref) return resolve(schemas[schema.$ref.replace('#/components/schemas/', '')], depth + 1);
    return [schema, ...(schema.allOf ?? []).flatMap((s) => resolve(s, depth + 1))];
  };
  const bodyHas = (path: string, field: string): boolean =>
    resolve(paths[path]?.post?.requestBody?.content?.['application/json']?.schema).some((s) => s.properties?.[field] !== undefined);
  const popParameters = (paths['/queue/{queue_id}/pop']?.post?.parameters ?? []).map((p) => p.name);
  return {
    lockPerItem: popParameters.includes('lock_per_item'),
    batchLocks: paths['/queue/{queue_id}/acknowledge/batch']?.post !== undefined && paths['/queue/{queue_id}/release/batch']?.post !== undefined,
    deadLetterRelease: bodyHas('/queue/{queue_id}/release', 'dead_letter'),
    acknowledgeNext: bodyHas('/queue/{queue_id}/acknowledge', 'next'),
  };
}
