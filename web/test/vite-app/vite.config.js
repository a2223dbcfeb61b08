// Bundles the test app with `pocketrt` resolved to the built package (../../../pkg).
import { defineConfig } from 'vite';
import { fileURLToPath } from 'node:url';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: './',
  logLevel: 'warn',
  resolve: { alias: { pocketrt: fileURLToPath(new URL('../../../pkg', import.meta.url)) } },
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022' },
});
