/** Small statistics for evaluation: intervals, majority votes, Pareto sets. */

/**
 * Wilson score interval for a binomial proportion (k successes of n) at z (1.96 ≈ 95%).
 * Unlike the normal approximation it stays inside [0, 1] and is sensible at k = 0 or n.
 */
export function wilsonInterval(k: number, n: number, z = 1.959963984540054): [number, number] {
  if (!Number.isInteger(k) || !Number.isInteger(n) || n < 0 || k < 0 || k > n) {
    throw new Error(`wilsonInterval: need integers 0 ≤ k ≤ n (got k=${k}, n=${n})`);
  }
  if (n === 0) return [0, 1];
  const p = k / n;
  const z2 = z * z;
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const half = (z / (1 + z2 / n)) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  return [Math.max(0, centre - half), Math.min(1, centre + half)];
}

/**
 * The most frequent answer among samples (null answers do not vote). Ties go to the answer
 * that reached the top count first, so the result does not depend on object key order.
 */
export function majorityVote(answers: readonly (string | null)[]): string | null {
  const counts = new Map<string, number>();
  let best: string | null = null;
  let bestCount = 0;
  for (const a of answers) {
    if (a === null) continue;
    const c = (counts.get(a) ?? 0) + 1;
    counts.set(a, c);
    if (c > bestCount) {
      best = a;
      bestCount = c;
    }
  }
  return best;
}

/**
 * Indices of the points not dominated by any other: lower cost and higher accuracy are
 * better; a point is dominated when another is at least as good on both and strictly better
 * on one. Returned sorted by cost.
 */
export function paretoSet(points: readonly { cost: number; accuracy: number }[]): number[] {
  const keep: number[] = [];
  points.forEach((p, i) => {
    const dominated = points.some((q, j) => j !== i && q.cost <= p.cost && q.accuracy >= p.accuracy && (q.cost < p.cost || q.accuracy > p.accuracy));
    if (!dominated) keep.push(i);
  });
  return keep.sort((a, b) => points[a].cost - points[b].cost || a - b);
}
