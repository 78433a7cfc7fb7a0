/**
 * Which settings differ between runs. Page runs keep the page's run config and CLI runs the
 * trainer config of run.json; both are compared in the trainer's shape (what `grpoConfigOf`
 * builds from a run config, the same object the CLI writes), flattened to dotted paths such as
 * `advantage.gating` or `loss.beta`, so a page run and a CLI run with the same recipe agree
 * field by field. Pure.
 */
import { GRPO_IMPLIED, withImplied } from '../../core/io/savedConfig';
import { grpoConfigOf } from '../../core/runConfigTargets';
import type { KeptRun } from './keptRun';
import { flagValue } from './cliRun';

/** A flat config: dotted path → value (arrays kept whole). */
export type FlatConfig = Record<string, unknown>;

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Nested objects → dotted paths, in the object's own key order. */
export function flattenConfig(obj: Record<string, unknown>, prefix = ''): FlatConfig {
  const out: FlatConfig = {};
  for (const [k, v] of Object.entries(obj)) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (isPlainObject(v) && Object.keys(v).length > 0) Object.assign(out, flattenConfig(v, path));
    else out[path] = v;
  }
  return out;
}

/** A start checkpoint as both sides spell it: "checkpoints/warmstart-naive" (no public/, no trailing slash). */
export function startName(source: string): string {
  return source.replace(/^\.?\/+/, '').replace(/^public\//, '').replace(/\/+$/, '');
}

/**
 * A run's settings as one flat config, or null when the run recorded none (a CLI run imported
 * without its run.json). `steps` is left out (the page trains open-ended; trained steps are
 * listed apart); where the run started from is `start`, the held-out evaluation `eval.every`
 * and `eval.n`.
 */
export function comparableConfig(run: KeptRun): FlatConfig | null {
  const o = run.origin;
  if (o.kind === 'page') {
    let trainer: Record<string, unknown>;
    try {
      trainer = { ...grpoConfigOf(o.config, 0) };
    } catch {
      // A config the trainer would refuse (it was kept anyway): compare its fields as they are.
      trainer = { ...o.config };
    }
    delete trainer.steps;
    const load = o.provenance.find((e) => e.kind === 'load');
    return { start: startName(load?.kind === 'load' ? load.source : o.model.source), ...flattenConfig(trainer), 'eval.every': o.config.evalEvery, 'eval.n': o.config.evalN };
  }
  if (o.config === null) return null;
  const { steps: _steps, init, ...saved } = o.config;
  // A GRPO run from before the token cost and its schedule recorded neither: it had neither, as the resume check reads it.
  const rest = isPlainObject(saved.reward) ? withImplied(saved, GRPO_IMPLIED) : saved;
  const out: FlatConfig = { start: typeof init === 'string' ? startName(init) : undefined, ...flattenConfig(rest) };
  if (out.start === undefined) delete out.start;
  // The CLI's evaluation flags live on its command line, not in the trainer config; defaults as `train` has them.
  if (o.command !== null) {
    out['eval.every'] = Number(flagValue(o.command, '--eval-every') ?? 0);
    out['eval.n'] = Number(flagValue(o.command, '--eval-n') ?? 64);
  }
  return out;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export interface ConfigDiffRow {
  key: string;
  /** One per run, in the order given; undefined: the run did not record this setting. */
  values: unknown[];
}

export interface ConfigDiff {
  /** Settings whose values are not all equal among the runs that recorded a config. */
  rows: ConfigDiffRow[];
  /** How many settings all of them share. */
  agreeing: number;
  /** Indices of the runs without a recorded config (left out of the comparison). */
  unrecorded: number[];
}

/**
 * The settings that differ among `configs`. Runs with no config are left out (and listed), so a
 * metrics-only import does not make every setting "differ"; a setting one recorded config has
 * and another lacks does differ (an older CLI that had no such option).
 */
export function configDiff(configs: readonly (FlatConfig | null)[]): ConfigDiff {
  const recorded = configs.filter((c): c is FlatConfig => c !== null);
  const unrecorded = configs.flatMap((c, i) => (c === null ? [i] : []));
  const keys: string[] = [];
  const seen = new Set<string>();
  for (const c of recorded) for (const k of Object.keys(c)) if (!seen.has(k)) (seen.add(k), keys.push(k));
  const rows: ConfigDiffRow[] = [];
  let agreeing = 0;
  for (const key of keys) {
    const values = recorded.map((c) => (Object.hasOwn(c, key) ? c[key] : undefined));
    if (recorded.length >= 2 && values.some((v) => v === undefined || !same(v, values[0]))) rows.push({ key, values: configs.map((c) => (c === null || !Object.hasOwn(c, key) ? undefined : c[key])) });
    else if (recorded.length >= 2) agreeing++;
  }
  return { rows, agreeing, unrecorded };
}

/** A setting's value as the table shows it. */
export function valueText(v: unknown): string {
  if (v === undefined) return '—';
  if (v === null) return 'off';
  if (Array.isArray(v)) return v.join(',');
  if (typeof v === 'number') return Math.abs(v) !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e6) ? v.toExponential() : String(v);
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** The settings the run list shows for every run (the ones a sweep or an ablation usually varies). */
export const KEY_SETTINGS: readonly { label: string; text: (c: FlatConfig) => string }[] = [
  { label: 'lr', text: (c) => valueText(c.lr) },
  { label: 'B×G', text: (c) => (c.batch === undefined && c.group === undefined ? '—' : `${valueText(c.batch)}×${valueText(c.group)}`) },
  { label: 'gating', text: (c) => (c['advantage.gating'] === undefined ? '—' : c['advantage.gating'] ? 'on' : 'off') },
];
