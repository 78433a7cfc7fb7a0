/**
 * Benchmark dispatcher: `npm run bench -- <name> [args]`. Each benchmark prints ratios measured
 * in one run (so machine speed cancels out) and its numbers are copied to docs/BENCHMARKS.md.
 */
import { runDecodeBench } from './decode';
import { runPageBench } from './page';
import { runPoolBench } from './pool';
import { runSftBench } from './sft';

const BENCHES: Record<string, (args: string[]) => Promise<void>> = {
  decode: runDecodeBench,
  page: runPageBench,
  pool: runPoolBench,
  sft: runSftBench,
};

async function main(): Promise<void> {
  const [name, ...args] = process.argv.slice(2);
  const run = name === undefined ? undefined : BENCHES[name];
  if (run === undefined) {
    console.error(`usage: npm run bench -- <name>   (one of: ${Object.keys(BENCHES).join(', ')})`);
    process.exit(2);
  }
  await run(args);
  // Worker threads of a pool keep the event loop alive.
  process.exit(0);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
