/**
 * Engine events → store. Metrics and episodes arrive in batches. The engine sends every event of
 * a replaced model before the reply that replaces it, so the action that handles that reply
 * clears them (showModel) and nothing here needs to know about runs.
 */
import { recordSteps, trainingSettings } from '../../core/io/provenance';
import type { StepMetrics } from '../../core/rl/grpoStep';
import type { EpisodeTrace } from '../../core/rollout/trace';
import type { EngineEvent } from '../../runtime/engine/messages';
import { episodesOf } from '../runs/metricsRows';
import { MAX_EPISODES, appendLog, setState, type EpisodeRow, type MetricPoint } from './store';

let nextEpisodeKey = 1;

/** Warm-start rows kept for the page (a long warm start keeps its latest steps). */
const MAX_SFT_ROWS = 20_000;

/**
 * Adds rows with a step after the last one shown (the engine's `metrics` events; a restored or reopened run's rows are set whole).
 * A step's episodes are those it sampled (its groups × the group size; with dynamic sampling more
 * than batch × group), as its violation counts are.
 */
export function addMetrics(rows: readonly StepMetrics[]): void {
  setState((s) => {
    const last = s.metrics.length ? s.metrics[s.metrics.length - 1].metrics.step : 0;
    const fresh: MetricPoint[] = rows.filter((m) => m.step > last).map((metrics) => ({ metrics, episodes: episodesOf(metrics, s.config) }));
    if (fresh.length === 0) return {};
    const provenance = recordSteps(
      s.provenance,
      'grpo',
      fresh.map((p) => ({ step: p.metrics.step, applied: true })),
      trainingSettings('grpo', s.config),
    );
    return { metrics: [...s.metrics, ...fresh], provenance };
  });
}

export function addEpisodes(step: number, traces: readonly EpisodeTrace[]): void {
  const rows: EpisodeRow[] = traces.map((trace) => ({ key: nextEpisodeKey++, step, trace }));
  setState((s) => ({ episodes: [...rows.reverse(), ...s.episodes].slice(0, MAX_EPISODES) }));
}

export function handleEvent(event: EngineEvent): void {
  switch (event.kind) {
    case 'backend':
      setState({ backend: event.report, workers: { rollout: event.workers, gradient: event.gradWorkers } });
      return;
    case 'status':
      setState((s) => {
        // Pause was pressed: a late report that the loop started (sent before the engine saw the pause) does not undo it.
        const stale = s.engineState === 'pausing' && (event.state === 'training' || event.state === 'sft');
        if (stale) return { policyVersion: event.policyVersion };
        const settled = event.state === 'idle' || event.state === 'paused';
        return {
          engineState: event.state,
          finishing: event.state === 'pausing' ? event.finishing : null,
          policyVersion: event.policyVersion,
          ...(settled ? { progress: null } : {}),
        };
      });
      return;
    case 'policyVersion':
      setState({ policyVersion: event.policyVersion });
      return;
    case 'metrics':
      addMetrics(event.rows);
      return;
    case 'episodes':
      addEpisodes(event.step, event.traces);
      return;
    case 'frontier':
      setState((s) => ({ frontier: [...s.frontier, ...event.points] }));
      return;
    case 'progress':
      setState({ progress: { what: event.what, done: event.done, total: event.total } });
      return;
    case 'sftProgress':
      setState({ sft: { step: event.step, steps: event.steps, loss: event.loss, tokensPerSec: event.tokensPerSec, etaSec: event.etaSec } });
      return;
    case 'sftMetrics':
      setState((s) => {
        // Each warm start is one schedule: its steps and first step go into the segment's settings.
        const warmStart = s.warmStart && { steps: s.warmStart.steps, firstStep: s.warmStart.firstStep ?? event.rows[0]?.step ?? null };
        const settings = { ...trainingSettings('sft', s.config), scheduleSteps: warmStart?.steps ?? null, scheduleStart: warmStart?.firstStep ?? null };
        return {
          sftMetrics: [...s.sftMetrics, ...event.rows].slice(-MAX_SFT_ROWS),
          provenance: recordSteps(
            s.provenance,
            'sft',
            event.rows.map((r) => ({ step: r.step, applied: !r.skipped })),
            settings,
          ),
          warmStart,
        };
      });
      return;
    case 'log':
      appendLog({ level: event.level, message: event.message });
      return;
  }
}
