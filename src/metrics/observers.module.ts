import { Global, Module } from '@nestjs/common';
import { RUNTIME_OBSERVER } from '../queue/runtime/runtime-observer.js';
import { MetricsRegistry, RuntimeHistograms } from './metrics-registry.js';

/**
 * The registry and the observers the runtime is constructed with. Global, so that the runtime
 * asks for an observer by its token without importing the metrics module (which reads the
 * runtime's gauges: importing it back would make a cycle).
 */
@Global()
@Module({
  providers: [MetricsRegistry, RuntimeHistograms, { provide: RUNTIME_OBSERVER, useExisting: RuntimeHistograms }],
  exports: [MetricsRegistry, RUNTIME_OBSERVER],
})
export class ObserversModule {}
