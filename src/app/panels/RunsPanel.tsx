/**
 * Kept runs: keep the current run under a name, import a CLI run (metrics.jsonl + run.json, or
 * a traces file alone, such as a verl run read back by `import-verl`),
 * list them with what tells them apart, rename, delete; tick one to draw its curves, two or more to overlay them
 * (RunsCompare). The current run can be ticked too, so a live run is compared as it trains.
 */
import { useMemo, useState } from 'react';
import { DEFAULT_SMOOTHING } from '../charts/smoothing';
import { SmoothingSelect } from '../charts/SmoothingSelect';
import { type FlatConfig, KEY_SETTINGS, comparableConfig } from '../runs/configDiff';
import { type KeptRun, pageHeldOut, suggestedRunName } from '../runs/keptRun';
import { runColour, runOutcome } from '../runs/overlay';
import { deleteKeptRun, deleteUnreadableRuns, exportKeptRun, importCliRun, keepCurrentRun, openStudy, renameKeptRun, reopenKeptRun } from '../runs/runsActions';
import { STUDIES } from '../runs/studies';
import { usePlayground } from '../state/store';
import { openTree } from '../state/actions';
import { RunsCompare } from './RunsCompare';

/** The id of the current (not kept) run in the list. */
const CURRENT = 'current';

/** The page's current run, drawn like a kept one (null: no steps yet). */
function useCurrentRun(): KeptRun | null {
  const model = usePlayground((s) => s.model);
  const config = usePlayground((s) => s.config);
  const metrics = usePlayground((s) => s.metrics);
  const frontier = usePlayground((s) => s.frontier);
  const provenance = usePlayground((s) => s.provenance);
  const policyVersion = usePlayground((s) => s.policyVersion);
  return useMemo(() => {
    if (model === null || metrics.length === 0) return null;
    return {
      id: CURRENT,
      name: 'current run (not kept)',
      keptAt: '',
      task: config.task,
      origin: { kind: 'page', config, hash: '', model: { preset: model.preset, source: model.source }, provenance },
      counters: { policyVersion, grpoSteps: metrics[metrics.length - 1].metrics.step, sftSteps: 0 },
      metrics,
      heldOut: pageHeldOut(frontier),
      frontier,
    };
  }, [model, config, metrics, frontier, provenance, policyVersion]);
}

const fmt = (v: number, digits = 3) => (Number.isFinite(v) ? v.toFixed(digits) : '—');

function originText(run: KeptRun): string {
  const o = run.origin;
  if (run.id === CURRENT) return 'this page, now';
  if (o.kind === 'page')
    return `page · ${o.model.preset} from ${o.model.source} · policy v${run.counters.policyVersion ?? '?'}${o.hash ? ` · #${o.hash}` : ''}`;
  return `CLI · ${o.files.join(' + ')}${o.command ? ` · ${o.command.join(' ')}` : ''}`;
}

/** A kept run's stored rollouts (e.g. a verl run read back): pick one to see its delegation tree. */
function RolloutPicker({ run }: { run: KeptRun }) {
  const rollouts = run.rollouts ?? [];
  return (
    <select
      data-testid="run-rollouts"
      aria-label={`rollouts of ${run.name}`}
      value=""
      title="Open one of this run's rollouts in the delegation tree (stored with the run when it was imported with its traces)"
      onChange={(e) => {
        if (e.target.value === '') return;
        openTree({ kind: 'kept', run: run.id, index: Number(e.target.value) });
      }}
    >
      <option value="">tree of… ({rollouts.length} rollouts)</option>
      {rollouts.map((t, i) => (
        <option key={i} value={i}>
          {t.step !== undefined ? `step ${t.step} · ` : ''}
          {t.correct ? '✓' : '✗'} {t.answer ?? '∅'} · {t.contexts.length - 1} clone{t.contexts.length === 2 ? '' : 's'}
        </option>
      ))}
    </select>
  );
}

function RunRow({
  run,
  index,
  selected,
  onToggle,
  config,
  differs,
  smoothing,
}: {
  run: KeptRun;
  index: number;
  selected: boolean;
  onToggle: () => void;
  config: FlatConfig | null;
  differs: boolean[];
  smoothing: number;
}) {
  const [draft, setDraft] = useState<string | null>(null);
  const outcome = runOutcome(run, smoothing);
  const kept = run.id !== CURRENT;
  const commit = async () => {
    if (draft !== null && (await renameKeptRun(run.id, draft))) setDraft(null);
  };
  return (
    <tr data-testid="run-row" data-run-id={run.id} data-name={run.name} data-selected={selected} title={originText(run)}>
      <td>
        <input type="checkbox" data-testid="run-select" aria-label={`compare ${run.name}`} checked={selected} onChange={onToggle} />
      </td>
      <td>
        <span className="run-swatch" style={{ background: runColour(index) }} aria-hidden="true" />
      </td>
      <td className="wrap run-name">
        {draft === null ? (
          <span data-testid="run-name">{run.name}</span>
        ) : (
          <input
            data-testid="run-rename-input"
            aria-label="new name"
            value={draft}
            autoFocus
            onChange={(e) => setDraft(e.target.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter') void commit();
              if (e.key === 'Escape') setDraft(null);
            }}
          />
        )}
      </td>
      <td>{run.task || '—'}</td>
      <td className="num" data-testid="run-steps">
        {outcome.steps}
      </td>
      {KEY_SETTINGS.map((k, i) => (
        <td key={k.label} className={`mono${differs[i] ? ' changed' : ''}`} title={differs[i] ? `${k.label}: not the same in every listed run` : undefined}>
          {config ? k.text(config) : '—'}
        </td>
      ))}
      <td className="num" data-testid="run-reward">
        {fmt(outcome.reward)}
      </td>
      <td
        className="num"
        data-testid="run-heldout"
        title={outcome.heldOut ? `step ${outcome.heldOut.step}${outcome.heldOut.n !== null ? `, n = ${outcome.heldOut.n}` : ''}` : 'no held-out evaluation'}
      >
        {outcome.heldOut ? `${fmt(outcome.heldOut.accuracy)} @${outcome.heldOut.step}` : '—'}
      </td>
      <td className="run-actions">
        {kept && draft === null && (
          <>
            <button type="button" data-testid="run-rename" onClick={() => setDraft(run.name)}>
              Rename
            </button>
            <button
              type="button"
              data-testid="run-export"
              title="Download this run's record (curves, held-out readings, config); Import reads it back"
              onClick={() => exportKeptRun(run.id)}
            >
              Export
            </button>
            {run.origin.kind === 'page' && (
              <button
                type="button"
                data-testid="run-reopen"
                title="Apply this run's config to the page (its weights were not kept: a new run starts from its start checkpoint)"
                onClick={() => void reopenKeptRun(run.id)}
              >
                Use config
              </button>
            )}
            <button type="button" data-testid="run-delete" onClick={() => void deleteKeptRun(run.id)}>
              Delete
            </button>
            {run.rollouts && run.rollouts.length > 0 && <RolloutPicker run={run} />}
          </>
        )}
        {kept && draft !== null && (
          <>
            <button type="button" data-testid="run-rename-save" onClick={() => void commit()}>
              Save
            </button>
            <button type="button" onClick={() => setDraft(null)}>
              Cancel
            </button>
          </>
        )}
      </td>
    </tr>
  );
}

export function RunsPanel() {
  const keptRuns = usePlayground((s) => s.keptRuns);
  const unreadable = usePlayground((s) => s.unreadableRuns);
  const note = usePlayground((s) => s.runsNote);
  const canKeep = usePlayground((s) => s.model !== null && (s.metrics.length > 0 || s.frontier.length > 0));
  const suggested = usePlayground((s) => suggestedRunName(s));
  const current = useCurrentRun();
  const [name, setName] = useState('');
  const [picked, setPicked] = useState<string[]>([]);
  // The fourth chart of the last study opened (the comparison opens anew on it).
  const [studyMetric, setStudyMetric] = useState<string | null>(null);
  const [smoothing, setSmoothing] = useState<number>(DEFAULT_SMOOTHING);
  const [busy, setBusy] = useState(false);

  // Kept runs first (their colours stay put as runs are added), the current one last.
  const runs = useMemo(() => (current ? [...keptRuns, current] : keptRuns), [keptRuns, current]);
  const configs = useMemo(() => runs.map(comparableConfig), [runs]);
  // A key setting is marked where the listed runs do not all agree on it.
  const differs = KEY_SETTINGS.map((k) => new Set(configs.filter((c): c is FlatConfig => c !== null).map((c) => k.text(c))).size > 1);
  // Memoised: the charts redraw when the ticked runs change, not at every render of the panel.
  const selected = useMemo(
    () => runs.map((r, i) => ({ run: r, color: runColour(i), config: configs[i] })).filter((d) => picked.includes(d.run.id)),
    [runs, configs, picked],
  );
  const toggle = (id: string) => setPicked((p) => (p.includes(id) ? p.filter((x) => x !== id) : [...p, id]));
  const act = async (f: () => Promise<unknown>) => {
    setBusy(true);
    try {
      await f();
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="panel runs-panel" aria-label="Kept runs" data-testid="runs-panel">
      <h2>
        Runs{' '}
        <span className="muted" data-testid="runs-count" data-kept={keptRuns.length}>
          {keptRuns.length === 0 ? 'none kept yet' : `${keptRuns.length} kept`} · tick a run to draw its curves, two or more to overlay
        </span>
      </h2>
      <div className="row">
        <label>
          keep the current run as <input data-testid="keep-run-name" size={34} placeholder={suggested} value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <button
          type="button"
          data-testid="keep-run"
          disabled={!canKeep || busy}
          title="Store this run's curves, held-out readings, frontier, config and provenance in the browser (not its weights: those are in the saved session)"
          onClick={() =>
            void act(async () => {
              if (await keepCurrentRun(name)) setName('');
            })
          }
        >
          Keep run
        </button>
        <label title="A CLI run directory's metrics.jsonl, with its run.json (or state.json) for the config; or a traces file alone (e.g. a verl run converted by import-verl): its curves come from its rollouts, which open as trees">
          import CLI run{' '}
          <input
            type="file"
            multiple
            accept=".jsonl,.json"
            data-testid="import-run-files"
            disabled={busy}
            onChange={(e) => {
              const files = Array.from(e.target.files ?? []);
              e.target.value = ''; // the same files can be picked again
              void act(() => importCliRun(files));
            }}
          />
        </label>
      </div>
      <div className="row small">
        <span className="muted">recorded studies:</span>
        {STUDIES.map((study) => (
          <button
            key={study.id}
            type="button"
            data-testid={`open-study-${study.id}`}
            disabled={busy}
            title={study.summary}
            onClick={() =>
              void act(async () => {
                const ids = await openStudy(study);
                if (ids) {
                  setPicked(ids);
                  setStudyMetric(study.metric);
                }
              })
            }
          >
            {study.title}
          </button>
        ))}
      </div>
      {note && (
        <p
          className={note.kind === 'error' ? 'error' : 'muted'}
          role={note.kind === 'error' ? 'alert' : undefined}
          data-testid={note.kind === 'error' ? 'runs-error' : 'runs-note'}
        >
          {note.message}
        </p>
      )}
      {unreadable.length > 0 && (
        <p className="warn" data-testid="runs-unreadable">
          {unreadable.length} stored run{unreadable.length === 1 ? '' : 's'} could not be read ({unreadable.map((u) => u.message).join('; ')}); kept until you{' '}
          <button type="button" onClick={() => void deleteUnreadableRuns()}>
            delete {unreadable.length === 1 ? 'it' : 'them'}
          </button>
        </p>
      )}
      {runs.length > 0 && (
        <div className="scroll-x">
          <table className="dense runs-table" data-testid="runs-table">
            <thead>
              <tr>
                <th aria-label="compare" />
                <th aria-label="colour" />
                <th>name</th>
                <th>task</th>
                <th className="num">steps</th>
                {KEY_SETTINGS.map((k) => (
                  <th key={k.label}>{k.label}</th>
                ))}
                <th className="num" title={`last mean reward, smoothed (EMA ${smoothing})`}>
                  reward
                </th>
                <th className="num" title="last held-out accuracy (delegate, greedy, monitor set) @ its step">
                  held-out
                </th>
                <th />
              </tr>
            </thead>
            <tbody>
              {runs.map((run, i) => (
                <RunRow
                  key={run.id}
                  run={run}
                  index={i}
                  selected={picked.includes(run.id)}
                  onToggle={() => toggle(run.id)}
                  config={configs[i]}
                  differs={differs}
                  smoothing={smoothing}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div className="row small">
        <SmoothingSelect
          testId="runs-smoothing"
          value={smoothing}
          onChange={setSmoothing}
          title="Exponential moving average over steps, debiased (as in the curves panel); the raw values faint behind"
        />
        {selected.length === 1 && <span className="muted">tick one more run to overlay</span>}
      </div>
      {/* One ticked run draws its own curves (a run read back from verl, alone); two or more overlay. */}
      {selected.length >= 1 && <RunsCompare key={studyMetric ?? ''} runs={selected} smoothing={smoothing} metric={studyMetric ?? undefined} />}
    </section>
  );
}
