import { DynamicModule, Global, Module } from '@nestjs/common';
import { checkExposure, loadApiKeys } from './api-keys.js';
import { AppConfig } from './app-config.js';
import { Environment, parseEnvironment } from './environment.js';

@Global()
@Module({})
export class ConfigModule {
  /**
   * Validates `process.env` (or the given overrides, for tests) once, reads the API keys, and
   * provides {@link AppConfig}. Throws EnvironmentError (the boot stops) on a bad variable, a
   * malformed key entry, or a non-loopback HOST without keys.
   */
  static forRoot(overrides: Partial<Record<keyof Environment, string>> = {}): DynamicModule {
    const env = parseEnvironment({ ...process.env, ...overrides });
    const keys = loadApiKeys(env);
    checkExposure(env, keys);
    const config = new AppConfig(env, keys);
    return { module: ConfigModule, providers: [{ provide: AppConfig, useValue: config }], exports: [AppConfig] };
  }
}
