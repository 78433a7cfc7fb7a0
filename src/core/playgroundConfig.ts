/**
 * The playground's run configuration: one table of properties, each with its default,
 * allowed range and how it maps into the trainer's configs. The page keeps it in the URL
 * hash (a run's setup is a shareable link); the worker validates it again before use.
 */
import { BUDGET_BUCKETS } from './tokenizer/vocab';

export interface PlaygroundConfig {
  task: 'arithmetic';
  preset: 'tiny' | 'small';
  group: number;
  batch: number;
  lr: number;
  beta: number;
  clip: number;
  rootTau: number;
  rootPmax: number;
  cloneTau: number;
  clonePmax: number;
  callRate: number;
  budgets: number[];
  maxClones: number;
  maxRounds: number;
  gating: boolean;
  credit: 'ratio' | 'broadcast';
  std: boolean;
  temperature: number;
  seed: number;
  /** GRPO steps between live frontier evaluations (0: none). */
  evalEvery: number;
  /** Held-out problems per live frontier evaluation (a fixed set). */
  evalN: number;
  workers: number;
  backend: 'auto' | 'webgpu' | 'wasm' | 'cpu';
}

type Prop =
  | { key: keyof PlaygroundConfig; type: 'number'; min: number; max: number; int?: boolean; label: string }
  | { key: keyof PlaygroundConfig; type: 'enum'; values: readonly string[]; label: string }
  | { key: keyof PlaygroundConfig; type: 'bool'; label: string }
  | { key: keyof PlaygroundConfig; type: 'budgets'; label: string };

export const CONFIG_DEFAULTS: PlaygroundConfig = {
  task: 'arithmetic',
  preset: 'small',
  group: 4,
  batch: 8,
  lr: 1e-4,
  beta: 0.001,
  clip: 0.2,
  rootTau: 64,
  rootPmax: 0.3,
  cloneTau: 32,
  clonePmax: 0.2,
  callRate: 0.1,
  budgets: [...BUDGET_BUCKETS],
  maxClones: 4,
  maxRounds: 3,
  gating: true,
  credit: 'ratio',
  std: true,
  temperature: 1,
  seed: 0,
  evalEvery: 10,
  evalN: 32,
  workers: 2,
  backend: 'auto',
};

/** Every property, in display order. */
export const CONFIG_PROPS: readonly Prop[] = [
  { key: 'task', type: 'enum', values: ['arithmetic'], label: 'Task' },
  { key: 'preset', type: 'enum', values: ['tiny', 'small'], label: 'Model preset' },
  { key: 'group', type: 'number', min: 2, max: 64, int: true, label: 'Group size G' },
  { key: 'batch', type: 'number', min: 1, max: 256, int: true, label: 'Prompts per step B' },
  { key: 'lr', type: 'number', min: 1e-7, max: 0.1, label: 'Learning rate' },
  { key: 'beta', type: 'number', min: 0, max: 1, label: 'KL β' },
  { key: 'clip', type: 'number', min: 0.01, max: 0.99, label: 'Clip ε' },
  { key: 'rootTau', type: 'number', min: 0, max: 4096, int: true, label: 'Root penalty τ' },
  { key: 'rootPmax', type: 'number', min: 0, max: 1, label: 'Root penalty Pmax' },
  { key: 'cloneTau', type: 'number', min: 0, max: 4096, int: true, label: 'Clone penalty τ' },
  { key: 'clonePmax', type: 'number', min: 0, max: 1, label: 'Clone penalty Pmax' },
  { key: 'callRate', type: 'number', min: 0, max: 1, label: 'Spawn-call penalty' },
  { key: 'budgets', type: 'budgets', label: 'Budget buckets' },
  { key: 'maxClones', type: 'number', min: 1, max: 30, int: true, label: 'Clones per round' },
  { key: 'maxRounds', type: 'number', min: 0, max: 10, int: true, label: 'Spawn rounds' },
  { key: 'gating', type: 'bool', label: 'Rollout gating' },
  { key: 'credit', type: 'enum', values: ['ratio', 'broadcast'], label: 'Clone credit' },
  { key: 'std', type: 'bool', label: 'Std normalisation' },
  { key: 'temperature', type: 'number', min: 0.05, max: 5, label: 'Temperature' },
  { key: 'seed', type: 'number', min: 0, max: 2 ** 31 - 1, int: true, label: 'Seed' },
  { key: 'evalEvery', type: 'number', min: 0, max: 100000, int: true, label: 'Frontier eval every (steps)' },
  { key: 'evalN', type: 'number', min: 1, max: 2000, int: true, label: 'Frontier eval problems' },
  { key: 'workers', type: 'number', min: 1, max: 16, int: true, label: 'Rollout workers' },
  { key: 'backend', type: 'enum', values: ['auto', 'webgpu', 'wasm', 'cpu'], label: 'Backend' },
];

/** One value checked against its property; returns an error naming field and range, or null. */
export function checkValue(prop: Prop, value: unknown): string | null {
  switch (prop.type) {
    case 'number': {
      const v = value as number;
      if (typeof v !== 'number' || !Number.isFinite(v) || v < prop.min || v > prop.max || (prop.int && !Number.isInteger(v))) {
        return `${prop.key} must be ${prop.int ? 'an integer' : 'a number'} in [${prop.min}, ${prop.max}] (got ${JSON.stringify(value)})`;
      }
      return null;
    }
    case 'enum':
      return prop.values.includes(value as string) ? null : `${prop.key} must be one of ${prop.values.join(', ')} (got ${JSON.stringify(value)})`;
    case 'bool':
      return typeof value === 'boolean' ? null : `${prop.key} must be true or false (got ${JSON.stringify(value)})`;
    case 'budgets': {
      const ok = Array.isArray(value) && value.length > 0 && value.every((b) => (BUDGET_BUCKETS as readonly number[]).includes(b));
      return ok ? null : `budgets must be a non-empty subset of ${BUDGET_BUCKETS.join(', ')} (got ${JSON.stringify(value)})`;
    }
  }
}

/** Validate a whole config; throws one message listing every bad field. */
export function validatePlaygroundConfig(partial: Partial<PlaygroundConfig>): PlaygroundConfig {
  const c = { ...CONFIG_DEFAULTS, ...partial };
  const errors = CONFIG_PROPS.map((p) => checkValue(p, c[p.key])).filter((e): e is string => e !== null);
  const unknown = Object.keys(partial).filter((k) => !CONFIG_PROPS.some((p) => p.key === k));
  errors.push(...unknown.map((k) => `unknown setting ${JSON.stringify(k)}`));
  if (errors.length) throw new Error(`config: ${errors.join('; ')}`);
  return c;
}

/** Config → URL hash (only values that differ from the defaults). */
export function configToHash(c: PlaygroundConfig): string {
  const parts: string[] = [];
  for (const p of CONFIG_PROPS) {
    const v = c[p.key];
    if (JSON.stringify(v) === JSON.stringify(CONFIG_DEFAULTS[p.key])) continue;
    parts.push(`${p.key}=${encodeURIComponent(Array.isArray(v) ? v.join(',') : String(v))}`);
  }
  return parts.join('&');
}

/**
 * URL hash → config. Bad values are reported (field, range) and replaced by defaults, so a
 * mangled link still opens; the caller shows the errors.
 */
export function configFromHash(hash: string): { config: PlaygroundConfig; errors: string[] } {
  const config: PlaygroundConfig = { ...CONFIG_DEFAULTS, budgets: [...CONFIG_DEFAULTS.budgets] };
  const errors: string[] = [];
  const raw = hash.replace(/^#/, '');
  for (const part of raw ? raw.split('&') : []) {
    const [k, v = ''] = part.split('=');
    const prop = CONFIG_PROPS.find((p) => p.key === k);
    if (!prop) {
      errors.push(`unknown setting ${JSON.stringify(k)}`);
      continue;
    }
    const text = decodeURIComponent(v);
    const value =
      prop.type === 'number' ? (text.trim() === '' ? NaN : Number(text)) : prop.type === 'bool' ? (text === 'true' ? true : text === 'false' ? false : text) : prop.type === 'budgets' ? text.split(',').map(Number) : text;
    const err = checkValue(prop, value);
    if (err) errors.push(err);
    else (config as unknown as Record<string, unknown>)[prop.key] = value;
  }
  return { config, errors };
}
