/**
 * The accuracy–cost frontier of the loaded weights and of the training run: evaluate any set
 * of methods and limits on the fixed held-out problems (run in the rollout workers), watch the
 * periodic evaluations of a training run arrive, switch the cost axis, export SVG and CSV.
 */
import { useRef, useState } from 'react';
import { validateLimits, validateMethods, validateProblemCount } from '../../core/eval/frontier';
import { type CostAxis, FrontierChart } from '../charts/FrontierChart';
import { nSummary } from '../charts/frontierMarks';
import { exportSvg } from '../charts/svgExport';
import { errorText, evaluateFrontier, exportFrontierCsv } from '../state/actions';
import { usePlayground } from '../state/store';

function parseForm(
  methods: string,
  limits: string,
  n: string,
): { ok: true; methods: ReturnType<typeof validateMethods>; limits: number[]; n: number } | { ok: false; error: string } {
  try {
    const m = validateMethods(
      methods
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    );
    const l = validateLimits(
      limits
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
        .map(Number),
    );
    return { ok: true, methods: m, limits: l, n: validateProblemCount(n.trim() === '' ? NaN : Number(n)) };
  } catch (e) {
    return { ok: false, error: errorText(e) };
  }
}

export function FrontierPanel() {
  const points = usePlayground((s) => s.frontier);
  const evalN = usePlayground((s) => s.config.evalN);
  const evalEvery = usePlayground((s) => s.config.evalEvery);
  const engineState = usePlayground((s) => s.engineState);
  const pending = usePlayground((s) => s.pending);
  const hasModel = usePlayground((s) => s.model !== null);
  const [cost, setCost] = useState<CostAxis>('total');
  const [methods, setMethods] = useState('delegate,mono,sc2,sc4');
  const [limits, setLimits] = useState('48,96');
  const [n, setN] = useState<string | null>(null);
  const svgRef = useRef<SVGSVGElement>(null);
  const form = parseForm(methods, limits, n ?? String(evalN));
  const free = hasModel && pending === null && (engineState === 'idle' || engineState === 'paused');
  const evaluating = pending === 'frontier';
  return (
    <section className="panel" aria-label="Accuracy–cost frontier" data-testid="frontier-panel">
      <h2>
        Frontier{' '}
        <span className="muted" data-testid="frontier-status">
          {evaluating
            ? 'evaluating…'
            : `${points.length === 0 ? 'no points yet' : `${points.length} points · monitor set, ${nSummary(points)}`}${evalEvery > 0 ? ` · during training every ${evalEvery} steps at n = ${evalN}` : ''}`}
        </span>
      </h2>
      <div className="row">
        <label>
          methods{' '}
          <input
            data-testid="frontier-methods"
            className={form.ok ? 'mono' : 'mono invalid'}
            size={22}
            value={methods}
            onChange={(e) => setMethods(e.target.value)}
          />
        </label>
        <label>
          limits <input data-testid="frontier-limits" className="mono" size={12} value={limits} onChange={(e) => setLimits(e.target.value)} />
        </label>
        <label>
          n <input data-testid="frontier-n" className="num" value={n ?? String(evalN)} onChange={(e) => setN(e.target.value)} />
        </label>
        <button
          type="button"
          data-testid="frontier-run"
          disabled={!free || !form.ok}
          onClick={() => form.ok && void evaluateFrontier(form.methods, form.limits, form.n)}
          title="Evaluate the current weights: every method at every root limit"
        >
          Evaluate
        </button>
      </div>
      {!form.ok && (
        <p className="field-error" data-testid="frontier-form-error">
          {form.error}
        </p>
      )}
      <div className="row">
        <span className="muted">cost</span>
        {/* A toggle: the chosen axis is pressed (drawn active), not disabled. */}
        <span className="toggle" role="group" aria-label="cost axis">
          <button type="button" data-testid="frontier-cost-total" aria-pressed={cost === 'total'} onClick={() => setCost('total')}>
            total tokens
          </button>
          <button type="button" data-testid="frontier-cost-critical" aria-pressed={cost === 'critical'} onClick={() => setCost('critical')}>
            critical path
          </button>
        </span>
        <button
          type="button"
          data-testid="frontier-export-svg"
          disabled={points.length === 0}
          onClick={() => svgRef.current && exportSvg(svgRef.current, `frontier-${cost}.svg`)}
        >
          SVG
        </button>
        <button type="button" data-testid="frontier-export-csv" disabled={points.length === 0} onClick={() => exportFrontierCsv()}>
          CSV
        </button>
      </div>
      <FrontierChart points={points} cost={cost} svgRef={svgRef} />
    </section>
  );
}
