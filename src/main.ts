import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { createApp } from './bootstrap.js';
import { AppConfig } from './config/app-config.js';
import { EnvironmentError } from './config/environment.js';
import { DatabaseProvider } from './database/database.provider.js';

async function main(): Promise<void> {
  const app = await createApp();
  const { PORT, HOST } = app.get(AppConfig).env;
  const logger = new Logger('pushpop');
  // Listen while the database opens: /health answers at once, /health/ready once it is open.
  await app.listen(PORT, HOST);
  logger.log(`Listening on http://${HOST}:${PORT} (Swagger UI at /docs)`);
  try {
    await app.get(DatabaseProvider).ready;
  } catch (error) {
    logger.error(`The database could not be opened: ${error instanceof Error ? error.message : String(error)}`);
    await app.close();
    process.exit(1);
  }
  logger.log('Ready');
}

main().catch((error: unknown) => {
  if (error instanceof EnvironmentError) {
    console.error(error.message);
  } else {
    console.error(error);
  }
  process.exit(1);
});
