/**
 * Weights must be finite: a NaN or an infinity in a checkpoint spreads through every product it
 * enters (a merged adapter, every logit after it), so a file holding one is refused by name.
 * 16-bit tensors are read from their stored bits (exponent all ones: NaN or infinity), so nothing
 * is widened for the check.
 */
import type { DecodedTensor } from './safetensors';

/** The first tensor of `tensors` holding a value that is not finite, described, or null. */
export function nonFiniteTensor(tensors: ReadonlyMap<string, DecodedTensor>): string | null {
  for (const [name, t] of tensors) {
    let count = 0;
    let first = -1;
    if (t.bits !== undefined) {
      const exponent = t.dtype === 'BF16' ? 0x7f80 : 0x7c00;
      const bits = t.bits;
      for (let i = 0; i < bits.length; i++) {
        if ((bits[i] & exponent) === exponent) {
          count++;
          if (first < 0) first = i;
        }
      }
    } else {
      const data = t.data;
      for (let i = 0; i < data.length; i++) {
        if (!Number.isFinite(data[i])) {
          count++;
          if (first < 0) first = i;
        }
      }
    }
    if (count > 0) {
      const value = t.bits !== undefined ? 'NaN or infinite' : String(t.data[first]);
      return `${name} holds ${count.toLocaleString('en')} value${count > 1 ? 's' : ''} that ${count > 1 ? 'are' : 'is'} not finite (the first, index ${first}, is ${value}); weights must be finite`;
    }
  }
  return null;
}
