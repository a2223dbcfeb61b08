// Builds the chat app into dist/app/ (repo root). The npm package is not bundled: it is
// copied as it is into dist/app/pkg/ and imported from there at run time (`pocketrt` is an
// external that resolves to ../pkg/pocket.js from the chunk in assets/), so its Workers,
// SharedWorker, threaded build and wasm variants keep the layout they were built for.
// After the build, sw.js gets the list of files to precache and a version (a hash of them).
import { defineConfig } from 'vite';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const outDir = process.env.POCKETRT_APP_OUT ?? path.resolve(here, '../../dist/app');
const pkg = process.env.POCKETRT_PKG ?? path.resolve(here, '../../pkg');

/** Every file under `dir`, as paths relative to it with forward slashes. */
function files(dir, prefix = '') {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const rel = prefix + e.name;
    return e.isDirectory() ? files(path.join(dir, e.name), `${rel}/`) : [rel];
  });
}

/** Copy the package into outDir/pkg and write the service worker's precache list. */
function packageAndServiceWorker() {
  return {
    name: 'pocketrt-package-and-sw',
    apply: 'build',
    closeBundle() {
      if (!fs.existsSync(path.join(pkg, 'pocket.js'))) throw new Error(`no built package at ${pkg} (scripts/build-web builds it)`);
      const dest = path.join(outDir, 'pkg');
      fs.rmSync(dest, { recursive: true, force: true });
      // The package's runtime files only (no type declarations or README).
      fs.cpSync(pkg, dest, { recursive: true, filter: (src) => !/\.d\.ts$|README\.md$/.test(src) });
      const list = files(outDir).filter((f) => f !== 'sw.js').sort();
      const hash = createHash('sha256');
      for (const f of list) hash.update(f).update(fs.readFileSync(path.join(outDir, f)));
      const version = hash.digest('hex').slice(0, 12);
      const sw = path.join(outDir, 'sw.js');
      const text = fs.readFileSync(sw, 'utf8')
        .replace("const VERSION = 'dev';", `const VERSION = '${version}';`)
        .replace('const PRECACHE = [];', `const PRECACHE = ${JSON.stringify(['./', ...list.filter((f) => f !== 'index.html')])};`);
      fs.writeFileSync(sw, text);
    },
  };
}

export default defineConfig({
  root: here,
  base: './',
  logLevel: 'warn',
  plugins: [packageAndServiceWorker()],
  build: {
    outDir,
    emptyOutDir: true,
    target: 'es2022',
    reportCompressedSize: false,
    rollupOptions: {
      external: ['pocketrt'],
      output: { paths: { pocketrt: '../pkg/pocket.js' } },
    },
  },
});
