/**
 * The run configuration, one field per CONFIG_PROPS entry. Edits are checked field by field;
 * Apply sends the whole config to the engine and writes it into the URL hash.
 */
import { useEffect, useMemo, useState } from 'react';
import { CONFIG_PROPS } from '../../core/playgroundConfig';
import { BUDGET_BUCKETS } from '../../core/tokenizer/vocab';
import { applyConfig } from '../state/actions';
import { changedKeys, configOfDraft, draftErrors, draftOf, type ConfigProp, type Draft } from '../state/configForm';
import { usePlayground } from '../state/store';

function Field({ prop, value, error, changed, onChange }: { prop: ConfigProp; value: Draft[keyof Draft]; error?: string; changed: boolean; onChange: (v: Draft[keyof Draft]) => void }) {
  const id = `config-${prop.key}`;
  let input;
  if (prop.type === 'enum') {
    input = (
      <select id={id} data-testid={id} value={String(value)} onChange={(e) => onChange(e.target.value)}>
        {prop.values.map((v) => (
          <option key={v}>{v}</option>
        ))}
      </select>
    );
  } else if (prop.type === 'bool') {
    input = <input id={id} data-testid={id} type="checkbox" checked={value === true} onChange={(e) => onChange(e.target.checked)} />;
  } else if (prop.type === 'budgets') {
    const chosen = Array.isArray(value) ? value : [];
    input = (
      <span id={id} data-testid={id} className="budgets">
        {BUDGET_BUCKETS.map((b) => (
          <label key={b}>
            <input type="checkbox" checked={chosen.includes(b)} onChange={(e) => onChange(e.target.checked ? [...chosen, b].sort((x, y) => x - y) : chosen.filter((c) => c !== b))} />
            {b}
          </label>
        ))}
      </span>
    );
  } else {
    input = <input id={id} data-testid={id} className={error ? 'num invalid' : 'num'} value={String(value)} title={`${prop.min} … ${prop.max}`} onChange={(e) => onChange(e.target.value)} />;
  }
  return (
    <>
      <label htmlFor={id} className={changed ? 'changed' : ''}>
        {prop.label}
      </label>
      <div>
        {input}
        {error && (
          <div className="field-error" data-testid={`config-error-${prop.key}`}>
            {error}
          </div>
        )}
      </div>
    </>
  );
}

export function ConfigPanel() {
  const config = usePlayground((s) => s.config);
  const hashErrors = usePlayground((s) => s.hashErrors);
  const pending = usePlayground((s) => s.pending);
  const engineState = usePlayground((s) => s.engineState);
  const [draft, setDraft] = useState<Draft>(() => draftOf(config));
  useEffect(() => setDraft(draftOf(config)), [config]);
  const errors = useMemo(() => draftErrors(draft), [draft]);
  const changed = useMemo(() => new Set(changedKeys(draft, config)), [draft, config]);
  const next = configOfDraft(draft, config);
  const idle = engineState === 'idle' || engineState === 'paused';
  return (
    <section className="panel" aria-label="Configuration">
      <h2>Config</h2>
      {hashErrors.length > 0 && (
        <ul className="error hash-errors" data-testid="hash-errors">
          {hashErrors.map((e) => (
            <li key={e}>URL: {e} (default kept)</li>
          ))}
        </ul>
      )}
      <div className="config-grid">
        {CONFIG_PROPS.map((p) => (
          <Field key={p.key} prop={p} value={draft[p.key]} error={errors[p.key]} changed={changed.has(p.key)} onChange={(v) => setDraft((d) => ({ ...d, [p.key]: v }))} />
        ))}
      </div>
      <div className="buttons">
        <button type="button" data-testid="config-apply" disabled={!next || changed.size === 0 || !idle || pending !== null} onClick={() => next && void applyConfig(next)} title={idle ? 'Send to the engine and write into the URL' : 'Pause first'}>
          Apply{changed.size > 0 ? ` (${changed.size})` : ''}
        </button>
        <button type="button" data-testid="config-revert" disabled={changed.size === 0} onClick={() => setDraft(draftOf(config))}>
          Revert
        </button>
      </div>
    </section>
  );
}
