import { fileURLToPath } from 'node:url';
import swc from 'unplugin-swc';
import { defineConfig } from 'vitest/config';

// SWC compiles the NestJS decorators with their metadata (esbuild/oxc do not emit it).
const swcPlugin = swc.vite({ module: { type: 'es6' }, jsc: { target: 'es2022' } });

// Tests run the library from its source, so no build step is needed before `npm test`.
const alias = {
  '@pushpop/keyed-mutex': fileURLToPath(new URL('./libs/keyed-mutex/src/index.ts', import.meta.url)),
  '@pushpop/api-client': fileURLToPath(new URL('./libs/api-client/src/index.ts', import.meta.url)),
  '@pushpop/client': fileURLToPath(new URL('./libs/client/src/index.ts', import.meta.url)),
};

/** End-to-end files that register OpenTelemetry's process-wide globals: run apart from the others' shared workers. */
const TRACING_FILES = ['test/e2e/tracing.test.ts', 'test/client/tracing.test.ts'];

export default defineConfig({
  plugins: [swcPlugin],
  resolve: { alias },
  // Outside node_modules, so that `npm ci` keeps it: Vitest starts the files that took longest last
  // time first (the rest by size), and a long file started last would hold up the whole run.
  cacheDir: '.cache/vite',
  test: {
    projects: [
      {
        plugins: [swcPlugin],
        resolve: { alias },
        // Specs share their workers' module graph (isolate: false): loading NestJS, TypeORM and the
        // service's modules once per worker instead of once per file is most of the project's time
        // (47 s → 13 s on two cores), and the specs keep no state in modules.
        test: { name: 'unit', sequence: { groupOrder: 0 }, isolate: false, include: ['src/**/*.spec.ts', 'libs/*/src/**/*.spec.ts'] },
      },
      {
        plugins: [swcPlugin],
        resolve: { alias },
        test: {
          name: 'e2e',
          sequence: { groupOrder: 1 },
          include: ['test/integration/**/*.test.ts', 'test/e2e/**/*.test.ts', 'test/client/**/*.test.ts'],
          exclude: TRACING_FILES,
          testTimeout: 120_000,
          hookTimeout: 120_000,
          // Each file starts its own service and database; two cores run two at a time.
          maxWorkers: 2,
          fileParallelism: true,
          // Files share their workers' module graph, as services in one process would: each file
          // starts and closes its own services, so what a service registers for the whole process
          // (tracing's globals) it gives up when it closes. Saves the import of the whole service
          // per file (about 100 s of a run on two cores).
          isolate: false,
        },
      },
      {
        plugins: [swcPlugin],
        resolve: { alias },
        // The tracing files each in a worker of their own: they register OpenTelemetry's globals
        // for the whole process (the context manager, the tracer provider), which a file that ran
        // before in a shared worker has had too.
        test: {
          name: 'e2e-tracing',
          // Beside the end-to-end files (the same group, so the same number of workers).
          sequence: { groupOrder: 1 },
          include: TRACING_FILES,
          testTimeout: 120_000,
          hookTimeout: 120_000,
          maxWorkers: 2,
          fileParallelism: true,
          isolate: true,
        },
      },
      {
        plugins: [swcPlugin],
        resolve: { alias },
        test: {
          name: 'browser',
          sequence: { groupOrder: 2 },
          include: ['test/browser/**/*.test.ts'],
          // Headless Chromium against the built admin console (built first if missing or stale);
          // one file at a time, after the other projects.
          testTimeout: 120_000,
          hookTimeout: 300_000,
          maxWorkers: 1,
          fileParallelism: false,
          // As the end-to-end files: the service and the console's helpers imported once (about 30 s).
          isolate: false,
          // The console polls every 2-5 s: expect.poll waits that long for the page to catch up.
          expect: { poll: { timeout: 10_000, interval: 100 } },
        },
      },
    ],
  },
});
