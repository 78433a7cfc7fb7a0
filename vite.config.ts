import { createReadStream, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import react from '@vitejs/plugin-react';
import { defineConfig, type Plugin } from 'vite';

/**
 * Where the tfjs wasm binaries are served, relative to the site base. The page and the
 * workers both pass `${BASE_URL}${TFJS_WASM_DIR}/` to setWasmPaths.
 */
const TFJS_WASM_DIR = 'tfjs-wasm';

/**
 * The single-threaded binaries only: the threaded one breaks in a minified build, so the
 * page turns wasm multithreading off (see src/app/backendInfo.ts) and never asks for it.
 */
const TFJS_WASM_FILES = ['tfjs-backend-wasm.wasm', 'tfjs-backend-wasm-simd.wasm'];

function tfjsWasmDist(): string {
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json')), 'dist');
}

/** Serves the tfjs wasm binaries in dev and copies them into the build, so nothing is fetched from a CDN. */
function tfjsWasmBinaries(): Plugin {
  const dist = tfjsWasmDist();
  return {
    name: 'selfcest:tfjs-wasm-binaries',
    configureServer(server) {
      server.middlewares.use((req, res, next) => {
        const path = (req.url ?? '').split('?')[0] ?? '';
        const prefix = `${server.config.base}${TFJS_WASM_DIR}/`;
        const name = path.startsWith(prefix) ? path.slice(prefix.length) : '';
        if (!TFJS_WASM_FILES.includes(name)) {
          next();
          return;
        }
        res.setHeader('Content-Type', 'application/wasm');
        createReadStream(join(dist, name)).pipe(res);
      });
    },
    generateBundle() {
      for (const name of TFJS_WASM_FILES) {
        this.emitFile({
          type: 'asset',
          fileName: `${TFJS_WASM_DIR}/${name}`,
          source: readFileSync(join(dist, name)),
        });
      }
    },
  };
}

// Cross-origin isolation gives the page SharedArrayBuffer and precise timers.
const crossOriginIsolation = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

export default defineConfig({
  plugins: [react(), tfjsWasmBinaries()],
  // public/ (shipped checkpoints) is copied to the build as-is.
  publicDir: 'public',
  server: { headers: crossOriginIsolation },
  preview: { headers: crossOriginIsolation },
  worker: { format: 'es' },
  build: {
    target: 'es2022',
    // tfjs is large; one warning per build about it says nothing new.
    chunkSizeWarningLimit: 4096,
  },
});
