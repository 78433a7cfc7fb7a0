/**
 * The run configuration, one field per page field of the run-config table: the essentials in view,
 * the rest in folds by what they set (a fold with a changed or wrong field opens by itself). Edits
 * are checked field by field; Apply sends the whole config to the engine and writes it into the URL hash.
 */
import { useEffect, useMemo, useState } from 'react';
import type { Field as TableField } from '../../core/runConfig';
import { HF_MODEL_ONLY, RUN_RECIPES, TASK_NAMES, TOY_MODEL_ONLY, rangeOf } from '../../core/runConfig';
import { BUDGET_BUCKETS } from '../../core/tokenizer/vocab';
import { applyConfig } from '../state/actions';
import {
  ESSENTIAL_FIELDS,
  FOLD_FIELDS,
  changedKeys,
  configOfDraft,
  draftErrors,
  draftOf,
  optionPresetsOf,
  presetOfDraft,
  recipesOfDraft,
  retaskDraft,
  withPreset,
  withRecipe,
  type ConfigProp,
  type Draft,
} from '../state/configForm';
import { usePlayground } from '../state/store';

/** The task options: JSON typed, or a named setting of the draft's task picked beside it ("custom" when it is none). */
function TaskOptionsInput({ id, prop, draft, error, onDraft }: { id: string; prop: ConfigProp; draft: Draft; error?: string; onDraft: (d: Draft) => void }) {
  const presets = optionPresetsOf(typeof draft.task === 'string' ? draft.task : '');
  const chosen = presetOfDraft(draft) ?? 'custom';
  return (
    <span className="task-options">
      <select
        data-testid={`${id}-preset`}
        aria-label="named setting of the task options"
        value={chosen}
        title="the task's named settings; typing in the field beside makes it custom"
        onChange={(e) => onDraft(withPreset(draft, e.target.value))}
      >
        {presets.map((p) => (
          <option key={p.name} value={p.name}>
            {p.label}
          </option>
        ))}
        {chosen === 'custom' && <option value="custom">custom</option>}
      </select>
      <input
        id={id}
        data-testid={id}
        className={error ? 'json invalid' : 'json'}
        value={String(draft.taskOptions ?? '')}
        spellCheck={false}
        title={`${prop.help}: ${rangeOf(prop)}`}
        onChange={(e) => onDraft({ ...draft, taskOptions: e.target.value })}
      />
    </span>
  );
}

function Field({
  prop,
  value,
  error,
  changed,
  onChange,
  draft,
  onDraft,
  appliesTo,
}: {
  prop: ConfigProp;
  value: Draft[keyof Draft];
  error?: string;
  changed: boolean;
  onChange: (v: NonNullable<Draft[keyof Draft]>) => void;
  draft: Draft;
  onDraft: (d: Draft) => void;
  /** Which model the field applies to, when not the one loaded (it is kept for the next model of that kind). */
  appliesTo?: string | null;
}) {
  const id = `config-${prop.key}`;
  let input;
  if (prop.type === 'json') {
    input = <TaskOptionsInput id={id} prop={prop} draft={draft} error={error} onDraft={onDraft} />;
  } else if (prop.type === 'enum' || prop.type === 'task') {
    const values: readonly string[] = prop.type === 'enum' ? prop.values : TASK_NAMES;
    input = (
      <select id={id} data-testid={id} value={String(value)} title={prop.help} onChange={(e) => onChange(e.target.value)}>
        {values.map((v) => (
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
            <input
              type="checkbox"
              checked={chosen.includes(b)}
              onChange={(e) => onChange(e.target.checked ? [...chosen, b].sort((x, y) => x - y) : chosen.filter((c) => c !== b))}
            />
            {b}
          </label>
        ))}
      </span>
    );
  } else {
    input = (
      <input
        id={id}
        data-testid={id}
        className={error ? 'num invalid' : 'num'}
        value={String(value ?? '')}
        title={`${prop.help}: ${rangeOf(prop)}`}
        onChange={(e) => onChange(e.target.value)}
      />
    );
  }
  return (
    <>
      <label htmlFor={id} className={changed ? 'changed' : ''}>
        {prop.label}
        {appliesTo && (
          <span
            className="muted small"
            data-testid={`config-applies-${prop.key}`}
            title={`This setting applies to ${appliesTo}; the model loaded now does not read it.`}
          >
            {' '}
            ({appliesTo})
          </span>
        )}
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

interface GridProps {
  /** The model a field applies to, where the loaded one does not read it. */
  appliesTo: (key: string) => string | null;
  draft: Draft;
  errors: Partial<Record<string, string>>;
  changed: ReadonlySet<string>;
  setDraft: React.Dispatch<React.SetStateAction<Draft>>;
}

function FieldGrid({ fields, draft, errors, changed, setDraft, appliesTo }: GridProps & { fields: readonly TableField[] }) {
  return (
    <div className="config-grid">
      {fields.map((p) => (
        <Field
          key={p.key}
          prop={p}
          value={draft[p.key]}
          error={errors[p.key]}
          changed={changed.has(p.key)}
          onChange={(v) => setDraft((d) => (p.key === 'task' && typeof v === 'string' ? retaskDraft(d, v) : { ...d, [p.key]: v }))}
          draft={draft}
          onDraft={setDraft}
          appliesTo={appliesTo(p.key)}
        />
      ))}
    </div>
  );
}

/** A fold of fields; it opens by itself while one of its fields is changed or wrong, so nothing asked of the user is hidden. */
function ConfigFold({ id, title, fields, grid }: { id: string; title: string; fields: readonly TableField[]; grid: GridProps }) {
  const [open, setOpen] = useState(false);
  const wrong = fields.filter((f) => grid.errors[f.key] !== undefined).length;
  const edited = fields.filter((f) => grid.changed.has(f.key)).length;
  const shown = open || wrong > 0 || edited > 0;
  return (
    <details
      className="fold config-fold"
      data-testid={`config-fold-${id}`}
      open={shown}
      onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}
    >
      <summary>
        {title}{' '}
        <span className="muted small">
          ({fields.length}
          {edited > 0 ? `, ${edited} changed` : ''}
          {wrong > 0 ? `, ${wrong} to fix` : ''})
        </span>
      </summary>
      <FieldGrid fields={fields} {...grid} />
    </details>
  );
}

export function ConfigPanel() {
  const config = usePlayground((s) => s.config);
  const hashErrors = usePlayground((s) => s.hashErrors);
  const hashNotes = usePlayground((s) => s.hashNotes);
  const pending = usePlayground((s) => s.pending);
  const engineState = usePlayground((s) => s.engineState);
  const [draft, setDraft] = useState<Draft>(() => draftOf(config));
  useEffect(() => setDraft(draftOf(config)), [config]);
  const errors = useMemo(() => draftErrors(draft), [draft]);
  const changed = useMemo(() => new Set(changedKeys(draft, config)), [draft, config]);
  const recipes = useMemo(() => recipesOfDraft(draft), [draft]);
  const next = configOfDraft(draft, config);
  const idle = engineState === 'idle' || engineState === 'paused';
  const modelKind = usePlayground((s) => s.model?.kind ?? 'toy');
  const appliesTo = (key: string): string | null =>
    modelKind !== 'hf' && (HF_MODEL_ONLY as readonly string[]).includes(key)
      ? 'Hugging Face models'
      : modelKind === 'hf' && (key === 'preset' || (TOY_MODEL_ONLY as readonly string[]).includes(key))
        ? 'the toy model'
        : null;
  const grid: GridProps = { draft, errors, changed, setDraft, appliesTo };
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
      {hashNotes.length > 0 && (
        <ul className="muted small hash-notes" data-testid="hash-notes">
          {hashNotes.map((n) => (
            <li key={n}>URL: {n}</li>
          ))}
        </ul>
      )}
      <div className="row small recipe-row">
        <label htmlFor="config-recipe">Recipe</label>
        <select
          id="config-recipe"
          data-testid="config-recipe"
          value={recipes[0] ?? 'custom'}
          title="Fills the fields a recipe names (the others stay); Apply sends them. Changed fields are marked."
          onChange={(e) => e.target.value !== 'custom' && setDraft(withRecipe(draft, e.target.value))}
        >
          {RUN_RECIPES.map((r) => (
            <option
              key={r.name}
              value={r.name}
              title={Object.entries(r.fields)
                .map(([k, v]) => `${k} ${JSON.stringify(v)}`)
                .join(', ')}
            >
              {r.label}
            </option>
          ))}
          {recipes.length === 0 && <option value="custom">custom</option>}
        </select>
      </div>
      <FieldGrid fields={ESSENTIAL_FIELDS} {...grid} />
      {FOLD_FIELDS.map((fold) => (
        <ConfigFold key={fold.id} id={fold.id} title={fold.title} fields={fold.fields} grid={grid} />
      ))}
      <div className="buttons">
        <button
          type="button"
          data-testid="config-apply"
          disabled={!next || changed.size === 0 || !idle || pending !== null}
          onClick={() => next && void applyConfig(next)}
          title={idle ? 'Send to the engine and write into the URL' : 'Pause first'}
        >
          Apply{changed.size > 0 ? ` (${changed.size})` : ''}
        </button>
        <button type="button" data-testid="config-revert" disabled={changed.size === 0} onClick={() => setDraft(draftOf(config))}>
          Revert
        </button>
      </div>
    </section>
  );
}
