import { Global, Module } from '@nestjs/common';
import { MetricCollectors } from './metric-collectors.js';
import { MetricsRegistry } from './metrics-registry.js';
import { RegistryCollectors } from './registry-collectors.js';

/**
 * The registry and the port through which each module registers its own metrics on it
 * ({@link MetricCollectors}). Global, so that a module asks for the port without importing the
 * metrics module.
 */
@Global()
@Module({
  providers: [MetricsRegistry, { provide: MetricCollectors, useClass: RegistryCollectors }],
  exports: [MetricsRegistry, MetricCollectors],
})
export class ObserversModule {}
