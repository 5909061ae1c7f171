import { DynamicModule, Global, Module } from '@nestjs/common';
import { AppConfig } from './app-config.js';
import { Environment, parseEnvironment } from './environment.js';

@Global()
@Module({})
export class ConfigModule {
  /** Validates `process.env` (or the given overrides, for tests) once and provides {@link AppConfig}. */
  static forRoot(overrides: Partial<Record<keyof Environment, string>> = {}): DynamicModule {
    const config = new AppConfig(parseEnvironment({ ...process.env, ...overrides }));
    return { module: ConfigModule, providers: [{ provide: AppConfig, useValue: config }], exports: [AppConfig] };
  }
}
