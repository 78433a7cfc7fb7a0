/**
 * Curve smoothing as TensorBoard does it: an exponential moving average, debiased so the first
 * points are not pulled toward 0. With weight w and the k-th finite value y_k:
 *
 *   last_k = w · last_{k−1} + (1 − w) · y_k,  last_0 = 0,   smoothed_k = last_k / (1 − w^k)
 *
 * Non-finite values pass through unchanged (and do not count toward k); a constant series is
 * returned as it is (the debiasing would only add rounding noise).
 */

/** The smoothing weights the charts offer (0: raw). */
export const SMOOTHING_WEIGHTS = [0, 0.6, 0.9, 0.97] as const;
export const DEFAULT_SMOOTHING = 0.6;

export function emaSmooth(values: readonly number[], weight: number): number[] {
  if (!(weight >= 0 && weight < 1)) throw new Error(`smoothing weight must be in [0, 1) (got ${weight})`);
  const finite = values.filter(Number.isFinite);
  if (weight === 0 || finite.every((v) => v === finite[0])) return [...values];
  let last = 0;
  let k = 0;
  return values.map((y) => {
    if (!Number.isFinite(y)) return y;
    last = last * weight + (1 - weight) * y;
    k++;
    return last / (1 - weight ** k);
  });
}
