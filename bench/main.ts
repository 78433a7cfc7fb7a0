/**
 * Benchmark dispatcher: `npm run bench -- <name> [args] [--backend wasm|cpu|webgpu]`. Each
 * benchmark prints ratios measured in one run (so machine speed cancels out) and its numbers are
 * copied to docs/BENCHMARKS.md. `--backend` (default wasm) is the CLI's: webgpu runs Dawn from
 * the npm package webgpu (src/runtime/node/nodeWebgpu.ts); the page benchmark drives Chromium
 * and takes none.
 */
import { UsageError } from '../src/cli/args';
import { BACKEND_FLAG, setupBackend } from '../src/cli/setup';
import type { BackendName } from '../src/runtime/backend';
import { runCoresBench } from './cores';
import { runDecodeBench } from './decode';
import { runFirstVisitBench } from './firstvisit';
import { runLmBench } from './lm';
import { runPageBench } from './page';
import { runPoolBench } from './pool';
import { runProfileBench } from './profile';
import { runRolloutBench } from './rollout';
import { runScalingBench } from './scaling';
import { runSftBench } from './sft';

/** Benchmarks in this process, on the `--backend`; `own`: one that sets its own (the page's). */
const BENCHES: Record<string, ((args: string[], backend: BackendName) => Promise<void>) | { own: (args: string[]) => Promise<void> }> = {
  cores: { own: runCoresBench },
  decode: runDecodeBench,
  firstvisit: { own: runFirstVisitBench },
  lm: runLmBench,
  page: { own: runPageBench },
  pool: runPoolBench,
  profile: runProfileBench,
  rollout: runRolloutBench,
  scaling: runScalingBench,
  sft: runSftBench,
};

/** Takes `--backend X` or `--backend=X` out of the arguments. */
function takeBackend(args: string[]): { backend: string | undefined; rest: string[] } {
  const rest: string[] = [];
  let backend: string | undefined;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--backend') backend = args[++i] ?? '';
    else if (args[i].startsWith('--backend=')) backend = args[i].slice('--backend='.length);
    else rest.push(args[i]);
  }
  return { backend, rest };
}

async function main(): Promise<void> {
  const [name, ...all] = process.argv.slice(2);
  const run = name === undefined ? undefined : BENCHES[name];
  if (run === undefined) {
    console.error(`usage: npm run bench -- <name> [args] [--backend ${BACKEND_FLAG.choices.join('|')}]   (one of: ${Object.keys(BENCHES).join(', ')})`);
    process.exit(2);
  }
  const { backend, rest } = takeBackend(all);
  if ('own' in run) {
    if (backend !== undefined) throw new Error(`bench ${name} takes no --backend (it sets the page's own)`);
    await run.own(rest);
  } else {
    await run(rest, await setupBackend(backend ?? BACKEND_FLAG.default));
  }
  // Worker threads of a pool keep the event loop alive.
  process.exit(0);
}

main().catch((err: unknown) => {
  // A bad flag (parseFlags) is a usage error: its message names the flag and the allowed range.
  if (err instanceof UsageError) {
    console.error(err.message);
    process.exit(2);
  }
  console.error(err);
  process.exit(1);
});
