/**
 * The config panel's form: each CONFIG_PROPS entry as an editable draft value, checked with
 * the same checkValue the URL hash and the engine use. Pure; the panel renders it.
 */
import { CONFIG_PROPS, checkValue, type PlaygroundConfig } from '../../core/playgroundConfig';

export type ConfigProp = (typeof CONFIG_PROPS)[number];
export type ConfigKey = keyof PlaygroundConfig;

/** What the form holds per field: text for numbers (so "1e-4" can be typed), else the value. */
export type Draft = Record<ConfigKey, string | boolean | number[]>;

export function draftOf(config: PlaygroundConfig): Draft {
  const draft = {} as Draft;
  for (const p of CONFIG_PROPS) {
    const v = config[p.key];
    draft[p.key] = p.type === 'number' ? String(v) : (v as string | boolean | number[]);
  }
  return draft;
}

export function parseDraftValue(prop: ConfigProp, value: string | boolean | number[]): unknown {
  if (prop.type === 'number') return typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
  return value;
}

/** Field → error message (field name and allowed range) for every invalid field. */
export function draftErrors(draft: Draft): Partial<Record<ConfigKey, string>> {
  const errors: Partial<Record<ConfigKey, string>> = {};
  for (const p of CONFIG_PROPS) {
    const err = checkValue(p, parseDraftValue(p, draft[p.key]));
    if (err) errors[p.key] = err;
  }
  return errors;
}

/** The config a valid draft stands for, or null while any field is invalid. */
export function configOfDraft(draft: Draft, base: PlaygroundConfig): PlaygroundConfig | null {
  if (Object.keys(draftErrors(draft)).length > 0) return null;
  const config = { ...base } as Record<ConfigKey, unknown>;
  for (const p of CONFIG_PROPS) config[p.key] = parseDraftValue(p, draft[p.key]);
  return config as unknown as PlaygroundConfig;
}

/** Keys whose draft differs from the applied config. */
export function changedKeys(draft: Draft, config: PlaygroundConfig): ConfigKey[] {
  return CONFIG_PROPS.filter((p) => JSON.stringify(parseDraftValue(p, draft[p.key])) !== JSON.stringify(config[p.key])).map((p) => p.key);
}
