/** Checkpoint import (validated by the engine) and every export: weights, traces, metrics. */
import { IMPORT_HELP } from '../files/checkpointTar';
import { exportMetrics, exportTraces, exportWeights, importFiles } from '../state/actions';
import { loopActive, usePlayground } from '../state/store';
import { ProvenanceView } from './ProvenanceView';
import { SessionNote } from './SessionNote';

export function ModelPanel() {
  const pending = usePlayground((s) => s.pending);
  const engineState = usePlayground((s) => s.engineState);
  const importError = usePlayground((s) => s.importError);
  const importNote = usePlayground((s) => s.importNote);
  const hasModel = usePlayground((s) => s.model !== null);
  const running = loopActive(engineState);
  const free = hasModel && pending === null;
  return (
    <section className="panel" aria-label="Checkpoint">
      <h2>Checkpoint</h2>
      <SessionNote />
      <label className="row" title={IMPORT_HELP}>
        Import .tar or files{' '}
        <input
          type="file"
          multiple
          data-testid="import-files"
          disabled={!free || running}
          onChange={(e) => {
            const files = Array.from(e.target.files ?? []);
            e.target.value = ''; // the same files can be chosen again
            void importFiles(files);
          }}
        />
      </label>
      {importNote && !importError && (
        <p className="muted" data-testid="import-note">
          {importNote}
        </p>
      )}
      {importError && (
        <p className="error" role="alert" data-testid="import-error">
          Import failed, model kept: {importError}
        </p>
      )}
      <ProvenanceView />
      <div className="buttons">
        <button
          type="button"
          data-testid="export-weights"
          disabled={!free}
          onClick={() => void exportWeights()}
          title="model.safetensors, config.json, tokenizer.json, selfcest.json and provenance.json in one .tar"
        >
          Weights (.tar)
        </button>
        <button type="button" data-testid="export-traces" disabled={!free} onClick={() => void exportTraces()}>
          Traces JSONL
        </button>
        <button type="button" data-testid="export-metrics-jsonl" disabled={!free} onClick={() => void exportMetrics('jsonl')}>
          Metrics JSONL
        </button>
        <button type="button" data-testid="export-metrics-csv" disabled={!free} onClick={() => void exportMetrics('csv')}>
          CSV
        </button>
      </div>
    </section>
  );
}
