// Validates an OpenAPI document (default: the committed openapi.json) against the OpenAPI
// schema and checks that every $ref resolves. Exits non-zero with the parser's message on error.
//   node scripts/validate-openapi.mjs [path]
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';
import SwaggerParser from '@apidevtools/swagger-parser';

const file = process.argv[2] ?? fileURLToPath(new URL('../openapi.json', import.meta.url));

try {
  const api = await SwaggerParser.validate(file);
  process.stdout.write(`${file}: valid OpenAPI ${api.openapi ?? api.swagger} (${api.info.title} ${api.info.version})\n`);
} catch (error) {
  process.stderr.write(`${file}: invalid OpenAPI document\n${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
