/**
 * Starts a worker thread from a module URL. TypeScript entries (the CLI and the tests run the
 * sources through tsx) go through a two-line bootstrap that registers tsx's loader inside the
 * new thread first: on Node 20 a worker's `--import tsx` is not active yet when its entry
 * module loads. Built .js entries start directly.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { type NodeWorkerHandle, nodeWorkerHandle } from './nodeEndpoint';

export function startNodeWorker(entry: URL, name: string): NodeWorkerHandle {
  if (!entry.pathname.endsWith('.ts')) return nodeWorkerHandle(new Worker(entry, { name }));
  const tsxApi = tsxRegisterUrl();
  const bootstrap = `import(${JSON.stringify(tsxApi)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`;
  // execArgv: [] so that the parent's own loader flags are not applied a second time.
  return nodeWorkerHandle(new Worker(bootstrap, { eval: true, name, execArgv: [] }));
}

/** The ESM build of tsx's register API, found through tsx's own exports map. */
function tsxRegisterUrl(): string {
  const pkgPath = createRequire(import.meta.url).resolve('tsx/package.json');
  const pkg = JSON.parse(readFileSync(pkgPath, 'utf8')) as { exports: Record<string, { import?: { default?: string } }> };
  const file = pkg.exports['./esm/api']?.import?.default;
  if (file === undefined) throw new Error('tsx: no ESM export "./esm/api" (is tsx installed?)');
  return pathToFileURL(join(dirname(pkgPath), file)).href;
}
