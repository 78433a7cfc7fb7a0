/**
 * AdamW state as a safetensors file: one float32 vector per moment (`m.<param>`, `v.<param>`),
 * the optimizer's update count in the metadata (`step`), plus whatever the writer adds (the CLI:
 * `runStep`). The CLI's run directories keep it as optimizer.safetensors; the page's saved
 * session keeps one per optimizer beside the weights (OPTIMIZER_FILES).
 */
import { decodeSafetensors, encodeSafetensors } from './safetensors';

/** The page session's optimizer files: GRPO's and the warm start's AdamW. */
export const OPTIMIZER_FILES = { grpo: 'optimizer-grpo.safetensors', sft: 'optimizer-sft.safetensors' } as const;

export interface OptimizerState {
  step: number;
  tensors: Map<string, Float32Array>;
}

export function encodeOptimizerFile(state: OptimizerState, metadata: Record<string, string> = {}): Uint8Array {
  return encodeSafetensors(
    [...state.tensors].map(([name, data]) => ({ name, shape: [data.length], data })),
    { ...metadata, step: String(state.step) },
  );
}

/** The state in a file; `name` prefixes every error. Moments are checked against a model by AdamW.load. */
export function decodeOptimizerFile(bytes: Uint8Array, name: string): OptimizerState & { metadata: Record<string, string> } {
  let decoded;
  try {
    decoded = decodeSafetensors(bytes);
  } catch (e) {
    throw new Error(`${name}: ${(e as Error).message}`);
  }
  const step = Number(decoded.metadata.step);
  if (decoded.metadata.step === undefined || !Number.isSafeInteger(step) || step < 0) {
    throw new Error(`${name}: the optimizer step must be a non-negative integer (got ${JSON.stringify(decoded.metadata.step)})`);
  }
  const tensors = new Map<string, Float32Array>();
  for (const [k, t] of decoded.tensors) {
    if (t.dtype !== 'F32') throw new Error(`${name}: moment tensor ${k} must be F32 (got ${t.dtype})`);
    tensors.set(k, t.data);
  }
  return { step, tensors, metadata: decoded.metadata };
}
