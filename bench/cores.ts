/**
 * How much a second thread adds on this machine, kind of work by kind of work
 * (`npm run bench -- cores [--ms 2000] [--kinds a,b] [--rounds 2]`): each probe (bench/coresProbe.ts) runs in one worker
 * thread alone, then in two at once, alternating twice, best of each; the ratio is the two
 * threads' summed rate over one thread's. It is the ceiling a data-parallel step can reach for
 * that kind of work: a matMul-bound training step cannot scale past the matMul probe's ratio.
 * The main thread only waits. Needs idle cores.
 */
import { UsageError, parseFlags } from '../src/cli/args';
import { startNodeWorker } from '../src/runtime/node/startWorker';

const ENTRY = new URL('./coresProbe.ts', import.meta.url);
const KINDS = ['matmul-l2', 'matmul-train', 'stream', 'scalar', 'train-item'] as const;
const UNITS: Record<(typeof KINDS)[number], string> = {
  'matmul-l2': 'GFLOP/s',
  'matmul-train': 'GFLOP/s',
  stream: 'GB/s',
  scalar: 'G iterations/s',
  'train-item': 'thousand tokens/s',
};

export async function runCoresBench(args: string[]): Promise<void> {
  const f = parseFlags(args, {
    ms: { type: 'int', default: 2000, min: 200, max: 60000, help: 'milliseconds each probe runs' },
    kinds: { type: 'string', default: KINDS.join(','), help: `the probes to run, comma-separated (${KINDS.join(', ')})` },
    rounds: { type: 'int', default: 2, min: 1, max: 50, help: 'rounds of one thread then two; the best of each is printed' },
  } as const);
  const kinds = f.kinds.split(',').map((k) => k.trim());
  for (const k of kinds)
    if (!(KINDS as readonly string[]).includes(k))
      throw new UsageError(`bench cores: --kinds: unknown probe ${JSON.stringify(k)} (known: ${KINDS.join(', ')})`);
  const workers = [startNodeWorker(ENTRY, 'cores-0'), startNodeWorker(ENTRY, 'cores-1')];
  const ask = (i: number, kind: string) =>
    new Promise<number>((resolve, reject) => {
      const t = workers[i].thread;
      const onMessage = (m: { kind: string; rate: number }) => {
        t.off('error', reject);
        resolve(m.rate);
      };
      t.once('message', onMessage);
      t.once('error', reject);
      t.postMessage({ kind, ms: f.ms });
    });
  try {
    // Warm both threads (backend start, kernel compilation).
    await Promise.all([ask(0, 'matmul-l2'), ask(1, 'matmul-l2')]);
    console.log(`cores bench: each probe ${f.ms} ms, one thread alone vs two threads at once, best of ${f.rounds}`);
    console.log('| work | one thread | two threads (sum) | ratio |');
    console.log('|---|---|---|---|');
    for (const kind of kinds as (typeof KINDS)[number][]) {
      let one = 0;
      let two = 0;
      for (let round = 0; round < f.rounds; round++) {
        one = Math.max(one, await ask(0, kind));
        const both = await Promise.all([ask(0, kind), ask(1, kind)]);
        two = Math.max(two, both[0] + both[1]);
      }
      console.log(`| ${kind} | ${one.toFixed(2)} ${UNITS[kind]} | ${two.toFixed(2)} | **${(two / one).toFixed(2)}×** |`);
    }
  } finally {
    for (const w of workers) await w.thread.terminate();
  }
}
