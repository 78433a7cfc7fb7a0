/**
 * Assembles the hand-written WebAssembly kernels (src/runtime/wasmKernels/*.wat) with wabt and
 * writes each binary as a base64 module beside its source, which the runtime imports (no
 * fetch, works the same in the page, its workers and Node). Run after editing a .wat:
 *
 *     npx tsx scripts/wasmKernels.ts          (write)
 *     npx tsx scripts/wasmKernels.ts --check  (exit 1 if a committed binary is stale)
 *
 * A unit test (src/runtime/wasmKernels/batchMatMul.test.ts) runs the same check.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { KERNELS, assemble, binaryModuleSource } from '../src/runtime/wasmKernels/assemble';

const check = process.argv.includes('--check');
let stale = 0;
for (const k of KERNELS) {
  const source = binaryModuleSource(k, await assemble(readFileSync(k.wat, 'utf8'), k.wat));
  const current = (() => {
    try {
      return readFileSync(k.out, 'utf8');
    } catch {
      return '';
    }
  })();
  if (current === source) continue;
  if (check) {
    console.error(`${k.out} is stale: run npx tsx scripts/wasmKernels.ts`);
    stale++;
  } else {
    writeFileSync(k.out, source);
    console.log(`wrote ${k.out}`);
  }
}
process.exit(stale === 0 ? 0 : 1);
