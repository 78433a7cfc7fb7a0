/**
 * AdamW with global-norm gradient clipping, written out so that its state (moments and
 * step) can be saved with a run and restored exactly on resume.
 */
import * as tf from '@tensorflow/tfjs';
import { adamwStep, fusedAdamWAvailable } from './adamwStep';
import { squaredGlobalNorm } from '../parallel/grads';

export interface AdamWConfig {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** Decoupled weight decay (applied to matrices only, not biases, LayerNorm or positions). */
  weightDecay: number;
  /** Global gradient-norm clip; 0 disables. */
  gradClip: number;
}

/** Adam's moment decays and epsilon: constants of the optimizer, not run settings (lr, weight decay and clip are: the config table's). */
export const ADAM_MOMENTS = { beta1: 0.9, beta2: 0.99, eps: 1e-8 } as const;

export interface StepStats {
  /** Global gradient norm before clipping. */
  gradNorm: number;
  /** False when the gradient was not finite and the update was skipped. */
  applied: boolean;
}

export class AdamW {
  private m = new Map<string, tf.Variable>();
  private v = new Map<string, tf.Variable>();
  step = 0;

  constructor(
    private readonly params: Map<string, tf.Variable>,
    public cfg: AdamWConfig,
  ) {
    for (const [name, p] of params) {
      // tidy: the zero tensors a variable is made from would otherwise stay allocated.
      this.m.set(
        name,
        tf.tidy(() => tf.variable(tf.zerosLike(p), false)),
      );
      this.v.set(
        name,
        tf.tidy(() => tf.variable(tf.zerosLike(p), false)),
      );
    }
  }

  /**
   * Apply one update from gradients keyed like the params (missing keys = zero gradient).
   * A non-finite gradient norm skips the update and leaves every tensor untouched.
   * The caller keeps ownership of `grads`.
   */
  async apply(grads: Map<string, tf.Tensor>, lr = this.cfg.lr): Promise<StepStats> {
    const sq = squaredGlobalNorm(grads.values());
    const gradNorm = Math.sqrt((await sq.data())[0]);
    sq.dispose();
    if (!Number.isFinite(gradNorm)) return { gradNorm, applied: false };
    const { beta1, beta2, eps, weightDecay, gradClip } = this.cfg;
    const scale = gradClip > 0 && gradNorm > gradClip ? gradClip / gradNorm : 1;
    this.step++;
    const bc1 = 1 - beta1 ** this.step;
    const bc2 = 1 - beta2 ** this.step;
    // The backend does not change within a step: ask once whether it has the fused kernel.
    const fusedKernel = fusedAdamWAvailable();
    tf.tidy(() => {
      for (const [name, p] of this.params) {
        const g0 = grads.get(name);
        if (!g0) continue;
        const m = this.m.get(name)!;
        const v = this.v.get(name)!;
        const decay = weightDecay > 0 && decays(name) ? lr * weightDecay : 0;
        if (fusedKernel) {
          const fused = adamwStep(p, g0, m, v, { lr, beta1, beta2, eps, bc1, bc2, decay, scale });
          m.assign(fused[1]);
          v.assign(fused[2]);
          p.assign(fused[0]);
          continue;
        }
        const g = scale === 1 ? g0 : tf.mul(g0, scale);
        m.assign(tf.add(tf.mul(m, beta1), tf.mul(g, 1 - beta1)));
        v.assign(tf.add(tf.mul(v, beta2), tf.mul(tf.square(g), 1 - beta2)));
        const update = tf.div(tf.div(m, bc1), tf.add(tf.sqrt(tf.div(v, bc2)), eps));
        let next = tf.sub(p, tf.mul(update, lr));
        if (weightDecay > 0 && decays(name)) next = tf.sub(next, tf.mul(p, lr * weightDecay));
        p.assign(next);
      }
    });
    return { gradNorm, applied: true };
  }

  /** Moments as named arrays (`m.<param>`, `v.<param>`) for saving with a run. */
  async state(): Promise<{ step: number; tensors: Map<string, Float32Array> }> {
    // Every read starts in this turn, with the step: an update that runs while they finish cannot tear them apart.
    const step = this.step;
    const entries = [...[...this.m].map(([name, t]) => [`m.${name}`, t] as const), ...[...this.v].map(([name, t]) => [`v.${name}`, t] as const)];
    const data = await Promise.all(entries.map(([, t]) => t.data()));
    return { step, tensors: new Map(entries.map(([key], i) => [key, data[i] as Float32Array])) };
  }

  /**
   * Restore saved moments and step. Everything is checked before anything is assigned, so a bad
   * file leaves the optimizer as it was: step a non-negative integer, exactly one `m.` and one
   * `v.` array per parameter with its size, first moments finite, second moments finite and ≥ 0
   * (a negative one would put a NaN in the √v of the update), and both within what any run of
   * `step` updates can hold (momentBounds). Errors name the tensor; the caller adds the file.
   */
  load(step: number, tensors: ReadonlyMap<string, Float32Array>): void {
    if (!Number.isSafeInteger(step) || step < 0) {
      throw new Error(`optimizer step must be a non-negative integer (got ${typeof step === 'number' ? step : JSON.stringify(step)})`);
    }
    if (!(tensors instanceof Map)) throw new Error('moment tensors must be a map of name → Float32Array');
    const expected = new Set<string>();
    for (const [kind, table] of [
      ['m', this.m],
      ['v', this.v],
    ] as const) {
      for (const [name, t] of table) {
        const key = `${kind}.${name}`;
        expected.add(key);
        checkMoment(key, kind, tensors.get(key), t.size);
      }
    }
    for (const name of this.m.keys()) checkMomentBounds(name, tensors.get(`m.${name}`)!, tensors.get(`v.${name}`)!, step, this.cfg);
    const extra = [...tensors.keys()].filter((k) => !expected.has(k));
    if (extra.length > 0) {
      const shown = extra.slice(0, 5).join(', ') + (extra.length > 5 ? ` and ${extra.length - 5} more` : '');
      throw new Error(`unexpected moment tensor${extra.length > 1 ? 's' : ''} ${shown} (not a parameter of this model)`);
    }
    for (const [kind, table] of [
      ['m', this.m],
      ['v', this.v],
    ] as const) {
      for (const [name, t] of table) {
        const data = tensors.get(`${kind}.${name}`) as Float32Array;
        tf.tidy(() => t.assign(tf.tensor(data, t.shape)));
      }
    }
    this.step = step;
  }

  dispose(): void {
    for (const t of [...this.m.values(), ...this.v.values()]) t.dispose();
  }
}

/** One saved moment: present, float32, `size` values, finite, and for v also ≥ 0. */
function checkMoment(key: string, kind: 'm' | 'v', data: unknown, size: number): void {
  if (data === undefined) throw new Error(`moment tensor ${key} is missing`);
  if (!(data instanceof Float32Array)) throw new Error(`moment tensor ${key} must be float32 values`);
  if (data.length !== size) throw new Error(`moment tensor ${key} has ${data.length} values, expected ${size}`);
  for (let i = 0; i < data.length; i++) {
    const x = data[i];
    if (!Number.isFinite(x)) {
      throw new Error(`moment tensor ${key} contains ${x} at index ${i} (${kind === 'm' ? 'first' : 'second'} moments must be finite)`);
    }
    if (kind === 'v' && x < 0) throw new Error(`moment tensor ${key} contains ${x} at index ${i} (second moments must be ≥ 0)`);
  }
}

/**
 * What `step` Adam updates can leave in a moment, whatever the gradients: with every clipped
 * gradient element |g| ≤ gradClip, |m| ≤ gradClip·(1 − β1^t) and v ≤ gradClip²·(1 − β2^t); and
 * always (Cauchy–Schwarz on the two averages of the same gradients, when β1² < β2)
 * |m| ≤ ratio·√v with ratio = (1 − β1) / √((1 − β2)(1 − β1²/β2)). A moment past them was not
 * written by an optimizer step: it would send the weights far out in one update.
 */
export function momentBounds(step: number, cfg: Pick<AdamWConfig, 'beta1' | 'beta2' | 'gradClip'>): { m: number; v: number; ratio: number } {
  const { beta1, beta2, gradClip } = cfg;
  const clip = gradClip > 0 ? gradClip : Infinity;
  const ratio = beta1 * beta1 < beta2 ? (1 - beta1) / Math.sqrt((1 - beta2) * (1 - (beta1 * beta1) / beta2)) : Infinity;
  return { m: clip * (1 - beta1 ** step), v: clip * clip * (1 - beta2 ** step), ratio };
}

/** Float32 rounding over many updates, and √v of a v that underflowed to 0. */
const BOUND_SLACK = 1.001;
const BOUND_FLOOR = 1e-18;

function checkMomentBounds(name: string, m: Float32Array, v: Float32Array, step: number, cfg: AdamWConfig): void {
  const b = momentBounds(step, cfg);
  const what = `what ${step} optimizer step${step === 1 ? '' : 's'} can write`;
  for (let i = 0; i < m.length; i++) {
    const am = Math.abs(m[i]);
    if (am > b.m * BOUND_SLACK + BOUND_FLOOR) {
      throw new Error(
        `moment tensor m.${name} holds ${m[i]} at index ${i}, past ${what} (|m| ≤ ${b.m.toPrecision(4)} with gradients clipped to ${cfg.gradClip}): it was not written by this optimizer`,
      );
    }
    if (v[i] > b.v * BOUND_SLACK + BOUND_FLOOR) {
      throw new Error(
        `moment tensor v.${name} holds ${v[i]} at index ${i}, past ${what} (v ≤ ${b.v.toPrecision(4)} with gradients clipped to ${cfg.gradClip}): it was not written by this optimizer`,
      );
    }
    if (am > b.ratio * Math.sqrt(v[i]) * BOUND_SLACK + BOUND_FLOOR) {
      throw new Error(
        `moment tensor m.${name} holds ${m[i]} at index ${i} with v = ${v[i]} there: |m| ≤ ${b.ratio.toPrecision(4)}·√v for any gradients (β1 ${cfg.beta1}, β2 ${cfg.beta2}), so it was not written by this optimizer`,
      );
    }
  }
}

/** Weight decay applies to weight matrices, not to biases, LayerNorm or position tables. */
function decays(name: string): boolean {
  // LoRA's A and B matrices decay (as PEFT's parameters do under torch's AdamW).
  if (name.endsWith('.lora_A') || name.endsWith('.lora_B')) return true;
  // Not the GPT's LayerNorms (ln_*) and positions (wpe) (a GPT-2 folder's names are the GPT's),
  // nor a Llama-family model's RMSNorms (*norm.weight).
  return name.endsWith('.weight') && !name.includes('.ln_') && !name.includes('wpe') && !name.endsWith('norm.weight');
}

/** Linear warm-up then cosine decay to `minFrac`·peak. */
export function cosineLr(step: number, total: number, peak: number, warmup: number, minFrac: number): number {
  if (step < warmup) return (peak * (step + 1)) / warmup;
  const t = Math.min(1, (step - warmup) / Math.max(1, total - warmup));
  return peak * (minFrac + (1 - minFrac) * 0.5 * (1 + Math.cos(Math.PI * t)));
}
