import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { AppModule } from '../app.module.js';
import { buildOpenApiDocument, stableJson } from '../bootstrap.js';

/**
 * Writes openapi.json at the repository root from the code, without a database: the app is
 * created in preview mode, where nothing is instantiated or connected. Keys are sorted so
 * the committed file changes only where the API does.
 */
async function main(): Promise<void> {
  const app = await NestFactory.create(AppModule.forRoot(), new FastifyAdapter(), { preview: true, logger: false });
  const target = resolve(process.argv[2] ?? 'openapi.json');
  writeFileSync(target, stableJson(buildOpenApiDocument(app)));
  await app.close();
  console.log(`Wrote ${target}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
