/**
 * A small flag parser: `--name value`, `--flag`, and `--no-flag` for booleans.
 * Anything unexpected is a UsageError, which main.ts turns into exit code 2.
 */

export class UsageError extends Error {}

export type FlagSpec =
  | { type: 'string'; required?: boolean; choices?: readonly string[]; default?: string; help: string }
  | { type: 'int' | 'number'; required?: boolean; default?: number; min?: number; max?: number; help: string }
  | { type: 'bool'; default?: boolean; help: string };

export type FlagSpecs = Record<string, FlagSpec>;

type ValueOf<S extends FlagSpec> = S extends { type: 'string' } ? string : S extends { type: 'bool' } ? boolean : number;
export type ParsedFlags<S extends FlagSpecs> = { [K in keyof S]: ValueOf<S[K]> | undefined };

export function parseFlags<S extends FlagSpecs>(argv: readonly string[], specs: S): ParsedFlags<S> {
  const out: Record<string, string | number | boolean | undefined> = {};
  for (const [k, s] of Object.entries(specs)) out[k] = s.default;
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
    if (key.startsWith('no-') && specs[key.slice(3)]?.type === 'bool') {
      out[key.slice(3)] = false;
      continue;
    }
    const spec = specs[key];
    if (!spec) throw new UsageError(`unknown flag --${key}`);
    if (spec.type === 'bool') {
      out[key] = true;
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
      const v = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(v) || (spec.type === 'int' && !Number.isInteger(v))) {
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
  }
  return out as ParsedFlags<S>;
}

export function describeFlags(specs: FlagSpecs): string {
  return Object.entries(specs)
    .map(([k, s]) => {
      const kind = s.type === 'bool' ? '' : s.type === 'string' && s.choices ? ` ${s.choices.join('|')}` : ` <${s.type}>`;
      const def = s.default !== undefined ? ` (default ${s.default})` : '';
      return `  --${k}${kind}${'required' in s && s.required ? ' (required)' : ''}  ${s.help}${def}`;
    })
    .join('\n');
}
