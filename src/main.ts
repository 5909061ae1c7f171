import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { createApp } from './bootstrap.js';
import { AppConfig } from './config/app-config.js';
import { EnvironmentError } from './config/environment.js';

async function main(): Promise<void> {
  const app = await createApp();
  const { PORT, HOST } = app.get(AppConfig).env;
  await app.listen(PORT, HOST);
  new Logger('pushpop').log(`Listening on http://${HOST}:${PORT} (Swagger UI at /docs)`);
}

main().catch((error: unknown) => {
  if (error instanceof EnvironmentError) {
    console.error(error.message);
  } else {
    console.error(error);
  }
  process.exit(1);
});
