/**
 * How much a second thread adds on this machine, kind of work by kind of work
 * (`npm run bench -- cores [--ms 2000]`): each probe (bench/coresProbe.ts) runs in one worker
 * thread alone, then in two at once, alternating twice, best of each; the ratio is the two
 * threads' summed rate over one thread's. It is the ceiling a data-parallel step can reach for
 * that kind of work: a matMul-bound training step cannot scale past the matMul probe's ratio.
 * The main thread only waits. Needs idle cores.
 */
import { parseFlags } from '../src/cli/args';
import { startNodeWorker } from '../src/runtime/node/startWorker';

const ENTRY = new URL('./coresProbe.ts', import.meta.url);
const KINDS = ['matmul-l2', 'matmul-train', 'stream', 'scalar'] as const;
const UNITS: Record<(typeof KINDS)[number], string> = { 'matmul-l2': 'GFLOP/s', 'matmul-train': 'GFLOP/s', stream: 'GB/s', scalar: 'G iterations/s' };

export async function runCoresBench(args: string[]): Promise<void> {
  const f = parseFlags(args, { ms: { type: 'int', default: 2000, min: 200, max: 60000, help: 'milliseconds each probe runs' } } as const);
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
    console.log(`cores bench: each probe ${f.ms} ms, one thread alone vs two threads at once, best of 2`);
    console.log('| work | one thread | two threads (sum) | ratio |');
    console.log('|---|---|---|---|');
    for (const kind of KINDS) {
      let one = 0;
      let two = 0;
      for (let round = 0; round < 2; round++) {
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
