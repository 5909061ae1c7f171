import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

/** Where `npm run dev` finds the service: every API path goes there, the console stays with Vite. */
const API = 'http://127.0.0.1:8000';
const API_PATHS = ['/queue', '/queues', '/schedules', '/health', '/metrics', '/whoami', '/docs', '/openapi.json'];

export default defineConfig({
  // The service serves the build at /admin/ (src/admin/admin.module.ts).
  base: '/admin/',
  plugins: [react()],
  resolve: {
    // The client from its source, so the console builds without building libs/api-client first.
    alias: { '@pushpop/api-client': fileURLToPath(new URL('../../libs/api-client/src/index.ts', import.meta.url)) },
  },
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022' },
  server: {
    host: '127.0.0.1',
    port: 5173,
    proxy: Object.fromEntries(API_PATHS.map((path) => [path, { target: API, changeOrigin: false }])),
  },
});
