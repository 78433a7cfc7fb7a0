/**
 * A real language model in the page: a Hugging Face folder (gpt2, llama, qwen2, qwen3) picked from disk
 * or dropped, loaded in a worker of its own (src/runtime/lm/), its episodes under the spawn_clone
 * text protocol drawn as delegation trees with the model's own token strings, GRPO steps over LoRA
 * adapters with the run config's settings, and the adapters saved in PEFT's format.
 */
import { useEffect, useRef, useState } from 'react';
import type { TextStepAnatomy, TextStepMetrics } from '../../core/rl/textGrpo';
import { deltaColour } from '../state/slowMotion';
import type { FrontierPoint } from '../../core/eval/frontier';
import { FrontierChart } from '../charts/FrontierChart';
import { type TextEpisodeTrace, episodeTraceOfText } from '../../core/rollout/textTrace';
import { TEXT_LENGTHS } from '../../core/rollout/textLimits';
import type { EpisodeTrace } from '../../core/rollout/trace';
import { isHubId } from '../../core/io/hubFolder';
import { LmClient } from '../../runtime/lm/lmClient';
import type { LmModelInfo } from '../../runtime/lm/lmMessages';
import type { WeightStoragePreference } from '../../core/io/hfTextModel';
import type { LmStepperState } from '../../runtime/lm/lmStepper';
import { download } from '../files/download';
import { ContextView, WriterLegend } from '../panels/ContextView';
import { RolloutCells, RolloutHead } from '../panels/RolloutTable';
import { WASM_PATHS } from '../state/startup';
import { usePlayground } from '../state/store';
import { DelegationTree, TreeLegend } from '../tree/DelegationTree';
import { filesOfDirectoryInput, filesOfDrop, readFolderFiles } from '../files/modelFolder';

interface Episode {
  key: number;
  label: string;
  trace: EpisodeTrace;
}

const MAX_EPISODES = 64;
let nextKey = 1;
let client: LmClient | null = null;

/** The worker, started on first use (a page that never loads a model starts none). */
function lmClient(): LmClient {
  client ??= new LmClient();
  return client;
}

const fmt = (x: number, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : '—');

/** A number input kept within [min, max]; what cannot be read as a number reads `fallback`. */
function NumberField({
  label,
  value,
  min,
  max,
  step,
  fallback = min,
  title,
  onChange,
}: {
  label: string;
  value: number;
  min: number;
  max: number;
  step?: number;
  fallback?: number;
  title?: string;
  onChange: (v: number) => void;
}) {
  return (
    <label title={title}>
      {label}{' '}
      <input
        type="number"
        min={min}
        max={max}
        step={step}
        value={value}
        onChange={(e) => onChange(Math.max(min, Math.min(max, Number(e.target.value) || fallback)))}
      />
    </label>
  );
}

/** A token's text as shown: whitespace made visible, so a piece that is only a space or a newline can be seen. */
const visible = (piece: string) => piece.replace(/\n/g, '↵\n').replace(/^ $/, '␣');

/**
 * Slow motion of the last GRPO step, for its first prompt: the group's episodes side by side with
 * their rewards, each context's credit, and each token the model wrote coloured by how the step's
 * updates moved its log-probability (green up, red down).
 */
function StepAnatomyView({ anatomy, step }: { anatomy: TextStepAnatomy; step: number }) {
  let scale = 0;
  for (const e of anatomy.episodes)
    for (const c of e.contexts) for (const t of c.tokens) if (t.before !== null && t.after !== null) scale = Math.max(scale, Math.abs(t.after - t.before));
  return (
    <details className="fold" open data-testid="lm-anatomy">
      <summary>
        Slow motion of GRPO step {step}: its first prompt <span className="mono">{anatomy.prompt}</span> = <span className="mono">{anatomy.truth}</span>{' '}
        <span className="muted">(largest change of a token&apos;s log p: {scale.toFixed(3)})</span>
      </summary>
      <div className="slow-cols">
        {anatomy.episodes.map((e, g) => (
          <div key={g} className="slow-col" data-testid="lm-anatomy-episode">
            <div className="small">
              episode {g + 1}: answer <span className={`mono ${e.correct ? 'ok' : 'bad'}`}>{e.answer ?? '∅'}</span> · reward {e.reward.reward.toFixed(3)} (score{' '}
              {e.reward.score.toFixed(3)})
            </div>
            {e.contexts.map((c, j) => (
              <div key={j} className={`slow-ctx ${c.role}${c.credit.gated ? ' gated' : ''}`}>
                <div className="small">
                  {c.role === 'root' ? 'root' : `clone: ${c.objective ?? ''}`} · A {c.credit.advantage.toFixed(3)} · weight {c.credit.weight}
                  {c.credit.gated ? ' · gated' : ''}
                  {c.violation ? ` · ${c.violation}` : ''}
                </div>
                <div className="tokens slow-tokens">
                  {c.tokens.map((t, k) => {
                    const d = t.before !== null && t.after !== null ? t.after - t.before : null;
                    return (
                      <span
                        key={k}
                        className={`tok w-${t.writer}`}
                        style={d === null ? undefined : { background: deltaColour(d, scale) }}
                        title={
                          d === null
                            ? "not the model's token"
                            : `log p ${(t.before as number).toFixed(3)} → ${(t.after as number).toFixed(3)} (Δ ${d.toFixed(4)})`
                        }
                      >
                        {visible(t.piece)}
                      </span>
                    );
                  })}
                </div>
              </div>
            ))}
          </div>
        ))}
      </div>
    </details>
  );
}

/** The stepped episode: every context so far token by token, the next token and its candidates. */
function StepperView({ state }: { state: LmStepperState }) {
  return (
    <div data-testid="lm-stepper">
      {state.contexts.map((c, i) => (
        <div key={i} className="context-view" data-testid="lm-stepper-context" data-role={c.role}>
          <div className="context-head">
            {c.role === 'root' ? 'root' : `clone #${i}: ${c.objective ?? ''}`}
            {state.next?.context === i ? ' · generating' : ''}
          </div>
          <div className="tokens">
            {c.pieces.map((p, k) => (
              <span key={k} className={`tok w-${c.writers[k]}`} data-writer={c.writers[k]}>
                {visible(p)}
              </span>
            ))}
            {state.next?.context === i && (
              <span className="tok next-token" data-testid="lm-next-token" title="the token about to be added">
                {visible(state.next.picked)}
              </span>
            )}
          </div>
        </div>
      ))}
      {state.next && (
        <table className="small lm-candidates" data-testid="lm-candidates">
          <thead>
            <tr>
              <th>candidate</th>
              <th>p</th>
            </tr>
          </thead>
          <tbody>
            {state.next.candidates.map((c, k) => (
              <tr key={k} className={c.piece === state.next?.picked ? 'picked' : ''}>
                <td className="mono">{JSON.stringify(c.piece)}</td>
                <td>
                  <span className="bar" style={{ width: `${Math.round(c.prob * 100)}px` }} /> {c.prob.toFixed(3)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {state.done && <p className="small">The episode ended; it is in the episode list below.</p>}
    </div>
  );
}

export function LmPanel() {
  const config = usePlayground((s) => s.config);
  const [info, setInfo] = useState<(LmModelInfo & { folder: string; backend: string }) | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [progress, setProgress] = useState<string | null>(null);
  const [episodes, setEpisodes] = useState<Episode[]>([]);
  const [selected, setSelected] = useState<number | null>(null);
  const [context, setContext] = useState<number | null>(null);
  const [metrics, setMetrics] = useState<TextStepMetrics[]>([]);
  const [n, setN] = useState(2);
  const [temperature, setTemperature] = useState(0);
  const [rootTokens, setRootTokens] = useState<number>(TEXT_LENGTHS.rootMaxTokens);
  const [cloneBudget, setCloneBudget] = useState<number>(TEXT_LENGTHS.cloneBudget);
  const [loraR, setLoraR] = useState(8);
  const [loraAlpha, setLoraAlpha] = useState(16);
  const [targets, setTargets] = useState('q_proj,k_proj,v_proj,o_proj');
  const [dragging, setDragging] = useState(false);
  const [hubId, setHubId] = useState('');
  const [storage, setStorage] = useState<WeightStoragePreference>('auto');
  const [stepper, setStepper] = useState<LmStepperState | null>(null);
  const [anatomy, setAnatomy] = useState<TextStepAnatomy | null>(null);
  const [frontierLimits, setFrontierLimits] = useState('16,32,64');
  const [frontierN, setFrontierN] = useState(8);
  const [frontier, setFrontier] = useState<FrontierPoint[]>([]);
  const frontierSvg = useRef<SVGSVGElement | null>(null);

  useEffect(() => {
    if (!info) return;
    return lmClient().on((e) => setProgress(`${e.what === 'step' ? 'GRPO step' : 'rollouts'}: ${e.done}/${e.total} episodes`));
  }, [info]);

  const run = async (what: string, work: () => Promise<void>) => {
    setBusy(what);
    setError(null);
    try {
      await work();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(null);
      setProgress(null);
    }
  };

  const loaded = (folder: string, got: LmModelInfo, backend: string) => {
    setInfo({ ...got, folder, backend });
    setTargets(got.attentionTargets.join(','));
    setEpisodes([]);
    setMetrics([]);
    setSelected(null);
    setStepper(null);
    setAnatomy(null);
    setFrontier([]);
  };
  /** A refused folder leaves the model loaded before as it was; its error says that model is still the one loaded. */
  const stillLoaded = (e: unknown): never => {
    const message = e instanceof Error ? e.message : String(e);
    throw new Error(info === null ? message : `${message} — nothing changed: ${info.folder || 'the model'} loaded before is still loaded`);
  };
  const started = () => lmClient().request({ kind: 'init', backend: config.backend, wasmPaths: new URL(WASM_PATHS, document.baseURI).href });
  const load = (folder: string, files: File[]) =>
    run('loading', async () => {
      if (files.length === 0) throw new Error(`${folder || 'the folder'} has none of a model's files (config.json, *.safetensors, tokenizer.json)`);
      const { backend } = await started();
      loaded(
        folder,
        await lmClient()
          .request({ kind: 'load', files: await readFolderFiles(files), storage })
          .catch(stillLoaded),
        backend,
      );
    });
  const loadHub = (id: string) =>
    run(`fetching ${id} from the Hub`, async () => {
      if (!isHubId(id)) throw new Error(`${JSON.stringify(id)} is not a Hub model id (owner/name, e.g. HuggingFaceTB/SmolLM2-135M-Instruct)`);
      const { backend } = await started();
      loaded(id, await lmClient().request({ kind: 'loadHub', id, storage }).catch(stillLoaded), backend);
    });

  const limits = { rootMaxTokens: rootTokens, cloneBudget, maxClones: config.maxClones, maxRounds: config.maxRounds };
  const lora = {
    r: loraR,
    alpha: loraAlpha,
    targetModules: targets
      .split(',')
      .map((t) => t.trim())
      .filter((t) => t !== ''),
  };
  /** The GRPO steps the adapters have taken (none yet, or since a reset or a new model: 0). */
  const policyStep = metrics.at(-1)?.step ?? 0;
  const add = (traces: TextEpisodeTrace[], label: string, step = policyStep) => {
    const rows = traces.map((t, i) => ({ key: nextKey++, label: `${label} #${i + 1}`, trace: episodeTraceOfText(t, step) }));
    setEpisodes((old) => [...rows, ...old].slice(0, MAX_EPISODES));
    setSelected(rows[0]?.key ?? null);
    setContext(0);
  };

  const stepped = (r: { state: LmStepperState; trace?: TextEpisodeTrace }) => {
    setStepper(r.state);
    if (r.trace) add([r.trace], 'stepped');
  };
  const current = episodes.find((e) => e.key === selected) ?? null;
  const ctx = current?.trace.contexts.find((c) => c.id === context) ?? null;
  const last = metrics.at(-1);

  return (
    <section
      className={`panel lm-panel${dragging ? ' dropping' : ''}`}
      aria-label="Language model"
      data-testid="lm-panel"
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        void filesOfDrop(e.dataTransfer.items).then((got) =>
          got ? load(got.folder, got.files) : setError('drop a folder (a Hugging Face model folder), not files'),
        );
      }}
    >
      <h2>Language model</h2>
      <p className="muted small">
        A Hugging Face model folder (GPT-2, Llama, Qwen2, Qwen3: config.json, model.safetensors, tokenizer.json with its chat template), picked or dropped here.
        It runs in a worker of its own under the spawn_clone text protocol; training updates LoRA adapters with the run config&apos;s GRPO settings (group,
        batch, lr, clip, credit, gating, reward).
      </p>
      <label className="row">
        16-bit weights{' '}
        <select data-testid="lm-storage" value={storage} disabled={busy !== null} onChange={(e) => setStorage(e.target.value as WeightStoragePreference)}>
          <option value="auto">auto: kept 16-bit on WebGPU, float32 elsewhere</option>
          <option value="half">kept 16-bit (half the memory, widened where read)</option>
          <option value="float32">widened to float32 at load</option>
        </select>
      </label>
      <label className="row">
        Model folder{' '}
        <input
          type="file"
          data-testid="lm-folder"
          disabled={busy !== null}
          ref={(el) => el?.setAttribute('webkitdirectory', '')}
          onChange={(e) => {
            const { folder, files } = filesOfDirectoryInput(Array.from(e.target.files ?? []));
            e.target.value = '';
            void load(folder, files);
          }}
        />
      </label>
      <form
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          void loadHub(hubId.trim());
        }}
      >
        <label>
          or a Hub id{' '}
          <input
            type="text"
            data-testid="lm-hub-id"
            placeholder="HuggingFaceTB/SmolLM2-135M-Instruct"
            size={34}
            value={hubId}
            onChange={(e) => setHubId(e.target.value)}
          />
        </label>{' '}
        <button type="submit" data-testid="lm-hub-load" disabled={busy !== null || hubId.trim() === ''}>
          Fetch
        </button>
      </form>
      {info && (
        <p className="small" data-testid="lm-info">
          <b>{info.folder || 'model'}</b>: {info.family}, {info.parameters.toLocaleString('en')} parameters ({info.layers} layers, width {info.hiddenSize},{' '}
          {info.heads} heads over {info.kvHeads} key/value heads, vocabulary {info.vocabSize.toLocaleString('en')}) · {info.megabytes} MB as float32
          {info.halfTensors > 0 ? `, ${info.heldMegabytes} MB as held (${info.halfTensors} matrices 16-bit)` : ''}, {info.backendMegabytes} MB held by{' '}
          {info.backend} · loaded in {info.loadMs} ms{info.chatTemplate ? '' : ' · no chat template'}
        </p>
      )}
      {busy && (
        <p className="small" role="status" data-testid="lm-busy">
          {busy}… {progress ?? ''}
        </p>
      )}
      {error && (
        <p className="error" role="alert" data-testid="lm-error">
          {error}
        </p>
      )}
      {info && (
        <>
          <div className="row small">
            <NumberField label="episodes" value={n} min={1} max={32} onChange={setN} />{' '}
            <NumberField label="temperature" title="0 decodes greedily" value={temperature} min={0} max={5} step={0.1} onChange={setTemperature} />{' '}
            <NumberField label="root tokens" value={rootTokens} min={1} max={8192} onChange={setRootTokens} />{' '}
            <NumberField label="clone budget" value={cloneBudget} min={1} max={8192} onChange={setCloneBudget} />
          </div>
          <div className="row small">
            <NumberField label="LoRA r" value={loraR} min={1} max={256} onChange={setLoraR} />{' '}
            <NumberField label="alpha" value={loraAlpha} min={0.1} max={1024} fallback={1} onChange={setLoraAlpha} />{' '}
            <label>
              targets <input type="text" value={targets} size={28} onChange={(e) => setTargets(e.target.value)} />
            </label>
          </div>
          <div className="buttons">
            <button
              type="button"
              data-testid="lm-rollout"
              disabled={busy !== null}
              onClick={() =>
                void run('rolling out', async () => {
                  const seed = nextKey;
                  const { traces } = await lmClient().request({ kind: 'rollout', config, seed, n, temperature, limits });
                  add(traces, `rollout (seed ${seed})`);
                })
              }
            >
              Roll out
            </button>
            <button
              type="button"
              data-testid="lm-train-step"
              disabled={busy !== null}
              title="one GRPO step: batch × group sampled episodes at the config's temperature, rewards, credit and gating, the LoRA update"
              onClick={() =>
                void run('training', async () => {
                  // The worker ends a stepped episode before the step changes the adapters.
                  setStepper(null);
                  const r = await lmClient().request({ kind: 'trainStep', config, lora, limits });
                  setMetrics((m) => [...m, r.metrics]);
                  setAnatomy(r.anatomy);
                  add(r.traces, `GRPO step ${r.metrics.step}`, r.metrics.step);
                })
              }
            >
              GRPO step
            </button>
            <button
              type="button"
              data-testid="lm-export-adapter"
              disabled={busy !== null || metrics.length === 0}
              onClick={() =>
                void run('exporting', async () => {
                  const { files } = await lmClient().request({ kind: 'exportAdapter' });
                  for (const [name, bytes] of Object.entries(files))
                    download(name, bytes, name.endsWith('.json') ? 'application/json' : 'application/octet-stream');
                })
              }
            >
              Adapter (PEFT)
            </button>
            <button
              type="button"
              disabled={busy !== null || metrics.length === 0}
              onClick={() =>
                void run('resetting', async () => {
                  setStepper(null);
                  await lmClient().request({ kind: 'resetAdapters' });
                  setMetrics([]);
                })
              }
            >
              Reset adapters
            </button>
          </div>
          <div className="buttons">
            <span className="small">Step through an episode:</span>
            <button
              type="button"
              data-testid="lm-step-start"
              disabled={busy !== null}
              onClick={() =>
                void run('starting', async () => stepped(await lmClient().request({ kind: 'stepperStart', config, seed: nextKey, temperature, limits })))
              }
            >
              New episode
            </button>
            {(['token', 'turn', 'end'] as const).map((until) => (
              <button
                key={until}
                type="button"
                data-testid={`lm-step-${until}`}
                disabled={busy !== null || stepper === null || stepper.done}
                onClick={() => void run('stepping', async () => stepped(await lmClient().request({ kind: 'stepperAdvance', until })))}
              >
                {until === 'token' ? 'Next token' : until === 'turn' ? 'Next turn' : 'To the end'}
              </button>
            ))}
          </div>
          {stepper && <StepperView state={stepper} />}
          <div className="row small">
            <span>Accuracy–cost frontier (greedy, held-out problems): root token limits</span>{' '}
            <input type="text" size={12} data-testid="lm-frontier-limits" value={frontierLimits} onChange={(e) => setFrontierLimits(e.target.value)} />{' '}
            <NumberField label="problems" value={frontierN} min={1} max={500} onChange={setFrontierN} />{' '}
            <button
              type="button"
              data-testid="lm-frontier"
              disabled={busy !== null}
              onClick={() =>
                void run('measuring the frontier', async () => {
                  const rootLimits = frontierLimits.split(',').map((x) => Number(x.trim()));
                  if (rootLimits.length === 0 || rootLimits.some((x) => !Number.isInteger(x) || x < 1 || x > 8192)) {
                    throw new Error(`root token limits must be integers in [1, 8192], comma-separated (got ${JSON.stringify(frontierLimits)})`);
                  }
                  const { points } = await lmClient().request({
                    kind: 'frontier',
                    config,
                    methods: ['delegate', 'mono'],
                    rootLimits,
                    n: frontierN,
                    limits: { cloneBudget, maxClones: config.maxClones, maxRounds: config.maxRounds },
                  });
                  setFrontier(points.map((p) => ({ ...p, checkpoint: `${info.folder || 'model'}${policyStep > 0 ? ` + LoRA step ${policyStep}` : ''}` })));
                })
              }
            >
              Measure
            </button>
          </div>
          {frontier.length > 0 && (
            <div data-testid="lm-frontier-chart">
              <FrontierChart points={frontier} cost="total" svgRef={frontierSvg} />
            </div>
          )}
          {metrics.length > 0 && (
            <table className="small lm-metrics" data-testid="lm-metrics">
              <thead>
                <tr>
                  <th>step</th>
                  <th>reward</th>
                  <th>accuracy</th>
                  <th>tokens</th>
                  <th>clones</th>
                  <th>delegating</th>
                  <th>loss</th>
                  <th>KL</th>
                  <th>updates</th>
                  <th>s</th>
                </tr>
              </thead>
              <tbody>
                {metrics.map((m) => (
                  <tr key={m.step}>
                    <td>{m.step}</td>
                    <td>{fmt(m.meanReward)}</td>
                    <td>{fmt(m.accuracy, 2)}</td>
                    <td>{fmt(m.meanTotalTokens, 0)}</td>
                    <td>{fmt(m.clonesPerEpisode, 2)}</td>
                    <td>{fmt(m.delegationRate, 2)}</td>
                    <td>{fmt(m.loss, 4)}</td>
                    <td>{m.kl.toExponential(1)}</td>
                    <td>{m.updates}</td>
                    <td>{fmt(m.wallSec, 1)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          {anatomy && last && <StepAnatomyView anatomy={anatomy} step={last.step} />}
          {last && last.zeroVarianceFraction === 1 && (
            <p className="muted small">
              Every group&apos;s rewards were equal in the last step: no advantage, nothing trained (a larger group or temperature helps).
            </p>
          )}
          {episodes.length > 0 && (
            <>
              <div className="scroll lm-episodes">
                <table className="dense rollout-table" data-testid="lm-episodes">
                  <RolloutHead first={<th>episode</th>} />
                  <tbody>
                    {episodes.map((e) => (
                      <tr
                        key={e.key}
                        data-testid="lm-episode-row"
                        className={e.key === selected ? 'selected' : ''}
                        onClick={() => (setSelected(e.key), setContext(0))}
                      >
                        <td>{e.label}</td>
                        <RolloutCells trace={e.trace} />
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              {current && (
                <div data-testid="lm-tree">
                  <p className="small">
                    <span className="mono">{current.trace.prompt}</span> = <span className="mono">{current.trace.truth}</span> · answer{' '}
                    <span className={`mono ${current.trace.correct ? 'ok' : 'bad'}`}>{current.trace.answer ?? '∅'}</span> · {current.trace.rounds} round(s) ·{' '}
                    {current.trace.tokens.total} tokens
                    {current.trace.reward ? ` · reward ${current.trace.reward.reward.toFixed(3)}` : ''}
                  </p>
                  <TreeLegend />
                  <div className="tree-scroll">
                    <DelegationTree trace={current.trace} selected={context} onSelect={setContext} />
                  </div>
                  <WriterLegend />
                  {ctx && <ContextView ctx={ctx} />}
                </div>
              )}
            </>
          )}
        </>
      )}
    </section>
  );
}
