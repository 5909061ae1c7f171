import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Standalone config so this lib's specs can run independently of the root config:
//   npx vitest run --config libs/keyed-mutex/vitest.config.ts
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  test: {
    name: 'keyed-mutex',
    include: ['src/**/*.spec.ts'],
    environment: 'node',
  },
});
