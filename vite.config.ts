import { createHash, randomBytes } from 'node:crypto';
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

/**
 * onnxruntime-web, bundled with @xenova/transformers (whose tokenizer the engine worker uses),
 * carries protobufjs's `inquire`, which on load looks for Node's `require` through an eval.
 * A browser has no `require`, so it finds nothing either way, but under the CSP the eval is also
 * reported as a violation. This hands it the answer it would get (nothing, caught by its own
 * try) without the eval. If a new onnxruntime-web words it differently, e2e/csp.spec.ts fails.
 */
function noOnnxruntimeEval(): Plugin {
  const EVAL = 'eval("quire".replace(/^/,"re"))';
  return {
    name: 'selfcest:no-onnxruntime-eval',
    transform(code, id) {
      if (!/[\\/]onnxruntime-web[\\/]dist[\\/]/.test(id) || !code.includes(EVAL)) return null;
      return { code: code.split(EVAL).join('undefined'), map: null };
    },
  };
}

// Cross-origin isolation gives the page SharedArrayBuffer and precise timers.
const crossOriginIsolation = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

/**
 * The Content-Security-Policy header, sent with every response (the page and its module
 * workers, which take their policy from their own script's response). Everything is served
 * from this origin, so 'self' is the whole allow-list; e2e/csp.spec.ts trains under it and
 * fails on any reported violation.
 *
 * - script-src 'wasm-unsafe-eval': compiling the tfjs wasm binary (WebAssembly.instantiate);
 *   it does not allow eval or new Function, which nothing here needs.
 * - worker-src 'self': the engine and rollout workers are same-origin ES module bundles (no
 *   blob: workers: the threaded wasm binary, which would make them, is never loaded).
 * - connect-src 'self': fetches of checkpoints/, the .wasm binaries and, in dev, the HMR
 *   websocket (CSP 3 lets 'self' match ws: on the same host and port); and the Hugging Face Hub
 *   (HUB_ORIGINS), where the Language model panel fetches a model by id (the Hub answers its
 *   download URLs with redirects to its CDN hosts).
 * - img-src data:: the empty `data:,` icon in index.html.
 * - style-src 'self': the built stylesheet; React and d3 set styles through the CSSOM, which
 *   CSP does not restrict. WebGPU and blob: downloads (an <a download> click) need no directive.
 * - style-src-attr: the one style attribute set by markup, on the standalone copy of a chart
 *   that src/app/charts/svgExport.ts serializes, allowed by its hash (SVG_EXPORT_STYLE).
 *   Setting it through `copy.style.cssText` there instead would make this directive unneeded.
 * - object-src, base-uri, form-action 'none', frame-ancestors 'none': no plugins, <base>, forms
 *   or framing.
 *
 * The dev server injects an inline script (React Fast Refresh's preamble) and <style> elements
 * (CSS imports, the error overlay). It allows them by a nonce: Vite writes `html.cspNonce` on
 * the tags it emits and on the <style>s its client adds. One random value per server start is
 * enough for a local dev server; the build has no inline code and gets no nonce.
 */
function contentSecurityPolicy(nonce?: string): string {
  const inline = nonce === undefined ? '' : ` 'nonce-${nonce}'`;
  const svgExportStyle = `'sha256-${createHash('sha256').update(SVG_EXPORT_STYLE).digest('base64')}'`;
  return [
    "default-src 'self'",
    `script-src 'self' 'wasm-unsafe-eval'${inline}`,
    "worker-src 'self'",
    `connect-src 'self' ${HUB_ORIGINS}`,
    "img-src 'self' data:",
    `style-src 'self'${inline}`,
    `style-src-attr 'unsafe-hashes' ${svgExportStyle}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The Hub and the hosts its file downloads redirect to. */
const HUB_ORIGINS = 'https://huggingface.co https://*.huggingface.co https://*.hf.co';

/** The style attribute svgExport.ts writes, character for character (e2e/csp.spec.ts exports a chart). */
const SVG_EXPORT_STYLE = 'color:#1d2430;background:#ffffff;font-family:system-ui,sans-serif';

const devNonce = randomBytes(16).toString('base64');

export default defineConfig(({ command }) => ({
  plugins: [react(), tfjsWasmBinaries(), noOnnxruntimeEval()],
  // public/ (shipped checkpoints) is copied to the build as-is.
  publicDir: 'public',
  server: { headers: { ...crossOriginIsolation, 'Content-Security-Policy': contentSecurityPolicy(devNonce) } },
  preview: { headers: { ...crossOriginIsolation, 'Content-Security-Policy': contentSecurityPolicy() } },
  // Dev server only ('serve'; preview serves dist/ as built): a build would bake it into index.html.
  html: command === 'serve' ? { cspNonce: devNonce } : {},
  // Worker bundles take their own plugin list (the engine worker is where onnxruntime-web is), and
  // the dev server pre-bundles dependencies with its own too.
  worker: { format: 'es', plugins: () => [noOnnxruntimeEval()] },
  optimizeDeps: { rolldownOptions: { plugins: [noOnnxruntimeEval()] } },
  build: {
    target: 'es2022',
    // tfjs is large; one warning per build about it says nothing new.
    chunkSizeWarningLimit: 4096,
  },
}));
