import { statSync } from 'node:fs';
/**
 * A small flag parser: `--name value`, `--name=value`, and for booleans `--flag`,
 * `--flag=true|false` and `--no-flag`. A command's own flags (paths, step counts, process
 * settings) come from its table; the run configuration's flags come from the one run-config
 * table (src/core/runConfig.ts) for `train` and `sft`. Anything unexpected is a UsageError,
 * which main.ts turns into exit code 2, naming the flag and its allowed range.
 */
import {
  type RunConfig,
  type RunConfigKey,
  RunConfigError,
  checkField,
  decimalNumber,
  fieldsOf,
  flagName,
  parseFieldText,
  rangeOf,
  validateRunConfig,
} from '../core/runConfig';

export class UsageError extends Error {}

export type FlagSpec =
  | {
      type: 'string';
      required?: boolean;
      choices?: readonly string[];
      default?: string;
      help: string;
      /** The value must name an existing directory. */ dir?: boolean;
    }
  | { type: 'int'; required?: boolean; default?: number; min?: number; /** Every count has an upper bound. */ max: number; help: string }
  | { type: 'number'; required?: boolean; default?: number; min?: number; max?: number; help: string }
  | { type: 'bool'; default?: boolean; help: string };

export type FlagSpecs = Record<string, FlagSpec>;

type ValueOf<S extends FlagSpec> = S extends { type: 'string' } ? string : S extends { type: 'bool' } ? boolean : number;
/** A flag with a default or marked required always has a value; others may be undefined. */
export type ParsedFlags<S extends FlagSpecs> = {
  [K in keyof S]: S[K] extends { default: unknown } | { required: true } ? ValueOf<S[K]> : ValueOf<S[K]> | undefined;
};

/** What a command line gives a run command: its own flags and the run configuration. */
export interface CommandLine<S extends FlagSpecs> {
  flags: ParsedFlags<S>;
  /** The validated run configuration (train, sft), or null for other commands. */
  config: RunConfig | null;
  /** The run-config fields given on the command line (the rest are defaults). */
  given: ReadonlySet<RunConfigKey>;
}

function boolValue(key: string, inline: string | undefined): boolean {
  if (inline === undefined || inline === 'true') return true;
  if (inline === 'false') return false;
  throw new UsageError(`--${key} is a switch: write --${key}, --${key}=true, --${key}=false or --no-${key} (got --${key}=${inline})`);
}

export function parseFlags<S extends FlagSpecs>(argv: readonly string[], specs: S): ParsedFlags<S> {
  return parseCommandLine(argv, specs, null).flags;
}

export function parseCommandLine<S extends FlagSpecs>(argv: readonly string[], specs: S, surface: 'train' | 'sft' | null): CommandLine<S> {
  const out: Record<string, string | number | boolean | undefined> = {};
  for (const [k, s] of Object.entries(specs)) out[k] = s.default;
  const fields = new Map(surface ? fieldsOf(surface).map((f) => [flagName(f), f]) : []);
  const partial: Record<string, unknown> = {};
  // Every field by its flag, so that a rule between fields names both flags.
  const names: Partial<Record<RunConfigKey, string>> = Object.fromEntries([...fields].map(([flag, f]) => [f.key, `--${flag}`]));
  const own = (key: string): FlagSpec | undefined => (Object.hasOwn(specs, key) ? specs[key] : undefined);
  const seen = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
    let key = arg.slice(2);
    let inline: string | undefined;
    const eq = key.indexOf('=');
    if (eq >= 0) {
      inline = key.slice(eq + 1);
      key = key.slice(0, eq);
    }
    const negated = key.startsWith('no-') && (own(key.slice(3))?.type === 'bool' || fields.get(key.slice(3))?.type === 'bool');
    if (negated) {
      if (inline !== undefined) throw new UsageError(`--${key} takes no value (got --${key}=${inline})`);
      key = key.slice(3);
    }
    if (seen.has(key)) throw new UsageError(`--${key} is given twice`);
    seen.add(key);
    const field = fields.get(key);
    if (field) {
      if (field.type === 'bool') {
        partial[field.key] = negated ? false : boolValue(key, inline);
        continue;
      }
      const raw = inline ?? argv[++i];
      if (raw === undefined) throw new UsageError(`--${key} needs a value (${rangeOf(field)})`);
      const value = parseFieldText(field, raw);
      // A number that does not parse is shown as written.
      const err = checkField(field, Number.isNaN(value) ? raw : value, `--${key}`);
      if (err) throw new UsageError(err);
      partial[field.key] = value;
      continue;
    }
    const spec = own(key);
    if (!spec) throw new UsageError(`unknown flag --${key}`);
    if (spec.type === 'bool') {
      out[key] = negated ? false : boolValue(key, inline);
      continue;
    }
    const raw = inline ?? argv[++i];
    if (raw === undefined) throw new UsageError(`--${key} needs a value`);
    if (spec.type === 'string') {
      if (spec.choices && !spec.choices.includes(raw)) {
        throw new UsageError(`--${key} must be one of ${spec.choices.join(', ')} (got ${JSON.stringify(raw)})`);
      }
      out[key] = raw;
    } else {
      const v = decimalNumber(raw);
      if (!Number.isFinite(v) || (spec.type === 'int' && !Number.isInteger(v))) {
        throw new UsageError(`--${key} must be ${spec.type === 'int' ? 'an integer' : 'a number'} (got ${JSON.stringify(raw)})`);
      }
      if ((spec.min !== undefined && v < spec.min) || (spec.max !== undefined && v > spec.max)) {
        throw new UsageError(`--${key} must be in [${spec.min ?? '-∞'}, ${spec.max ?? '∞'}] (got ${v})`);
      }
      out[key] = v;
    }
  }
  for (const [k, s] of Object.entries(specs)) {
    if ('required' in s && s.required && out[k] === undefined) throw new UsageError(`--${k} is required`);
    if (s.type === 'string' && s.dir && typeof out[k] === 'string') checkDirFlag(k, out[k]);
  }
  let config: RunConfig | null = null;
  if (surface) {
    try {
      config = validateRunConfig(partial as Partial<RunConfig>, surface, names);
    } catch (e) {
      if (e instanceof RunConfigError) throw new UsageError(e.errors.join('\n'));
      throw e;
    }
  }
  return { flags: out as ParsedFlags<S>, config, given: new Set(Object.keys(partial) as RunConfigKey[]) };
}

function checkDirFlag(flag: string, path: string): void {
  let isDir = false;
  try {
    isDir = statSync(path).isDirectory();
  } catch {
    throw new UsageError(`--${flag} ${JSON.stringify(path)} does not exist`);
  }
  if (!isDir) throw new UsageError(`--${flag} ${JSON.stringify(path)} is not a directory`);
}

export function describeFlags(specs: FlagSpecs, surface: 'train' | 'sft' | null = null): string {
  const own = Object.entries(specs).map(([k, s]) => {
    const kind = s.type === 'bool' ? '' : s.type === 'string' && s.choices ? ` ${s.choices.join('|')}` : ` <${s.type}>`;
    const def = s.default !== undefined ? ` (default ${s.default})` : '';
    return `  --${k}${kind}${'required' in s && s.required ? ' (required)' : ''}  ${s.help}${def}`;
  });
  if (!surface) return own.join('\n');
  const defaults = validateRunConfig({}, surface);
  const cfg = fieldsOf(surface).map((f) => {
    const name = flagName(f);
    const kind = f.type === 'bool' ? ` (or --no-${name})` : f.type === 'enum' ? ` ${f.values.join('|')}` : ` <${rangeOf(f)}>`;
    const d = defaults[f.key];
    const def =
      f.type === 'bool'
        ? ` (default ${d ? 'on' : 'off'})`
        : d === null || d === ''
          ? ''
          : ` (default ${typeof d === 'object' ? JSON.stringify(d) : String(d)}${
              f.taskDefault
                ? `; ${Object.entries(f.taskDefault)
                    .map(([t, v]) => `${v} for ${t}`)
                    .join(', ')}`
                : ''
            })`;
    return `  --${name}${kind}  ${f.help}${def}`;
  });
  return `${own.join('\n')}\n\nrun configuration (the page's config table):\n${cfg.join('\n')}`;
}

/**
 * Runs a config builder; its RunConfigErrors (a bad combination, bad task options) become a
 * UsageError (exit 2), with the fields renamed to the flags the user wrote (`renames`).
 */
export function usageErrors<T>(build: () => T, renames: Partial<Record<RunConfigKey, string>> = {}): T {
  try {
    return build();
  } catch (e) {
    if (!(e instanceof RunConfigError)) throw e;
    const named = e.errors.map((m) => {
      const key = Object.keys(renames).find((k) => m.startsWith(`${k}:`) || m.startsWith(`${k} `));
      return key ? `${renames[key as RunConfigKey]}${m.slice(key.length)}` : m;
    });
    throw new UsageError(named.join('\n'));
  }
}
