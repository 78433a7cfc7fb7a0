/**
 * The model: a checkpoint's or a Hugging Face folder's files (validated by the engine), a folder
 * picked whole, or a Hub id; and every export: weights, traces, metrics.
 */
import { useState } from 'react';
import { IMPORT_HELP } from '../files/checkpointTar';
import { filesOfDirectoryInput, filesOfDrop } from '../files/modelFolder';
import { exportMetrics, exportTraces, exportWeights, importFiles, loadHubModel } from '../state/actions';
import { loopActive, usePlayground } from '../state/store';
import { ProvenanceView } from './ProvenanceView';
import { SessionNote } from './SessionNote';

export function ModelPanel() {
  const pending = usePlayground((s) => s.pending);
  const engineState = usePlayground((s) => s.engineState);
  const importError = usePlayground((s) => s.importError);
  const importNote = usePlayground((s) => s.importNote);
  const hasModel = usePlayground((s) => s.model !== null);
  // The store's own array (a new [] on each read would re-render without end).
  const warnings = usePlayground((s) => s.model?.warnings) ?? [];
  const running = loopActive(engineState);
  const free = hasModel && pending === null;
  const [hubId, setHubId] = useState('');
  const [dropping, setDropping] = useState(false);
  return (
    <section
      className={dropping ? 'panel dropping' : 'panel'}
      aria-label="Checkpoint"
      data-testid="checkpoint-panel"
      // A folder or files dropped here import as picked ones do.
      onDragOver={(e) => {
        if (!free || running) return;
        e.preventDefault();
        setDropping(true);
      }}
      onDragLeave={() => setDropping(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDropping(false);
        if (!free || running) return;
        const loose = Array.from(e.dataTransfer.files);
        void filesOfDrop(e.dataTransfer.items).then((folder) => (folder ? importFiles(folder.files, folder.folder) : importFiles(loose)));
      }}
    >
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
      <label
        className="row"
        title="A Hugging Face model folder (config.json, model.safetensors, tokenizer.json and tokenizer_config.json with a chat template): its top-level files are read"
      >
        Model folder{' '}
        <input
          type="file"
          data-testid="import-folder"
          disabled={!free || running}
          // A directory picker: the attribute is not in React's typings.
          {...{ webkitdirectory: '' }}
          onChange={(e) => {
            const { folder, files } = filesOfDirectoryInput(Array.from(e.target.files ?? []));
            e.target.value = '';
            void importFiles(files, folder);
          }}
        />
      </label>
      <form
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          void loadHubModel(hubId);
        }}
      >
        <label title="A model on the Hugging Face Hub by its id, fetched from huggingface.co by this browser (no token is sent)">
          Hub id{' '}
          <input
            data-testid="hub-id"
            value={hubId}
            placeholder="owner/name"
            spellCheck={false}
            onChange={(e) => setHubId(e.target.value)}
            disabled={!free || running}
          />
        </label>{' '}
        <button type="submit" data-testid="hub-load" disabled={!free || running || hubId.trim() === ''}>
          Fetch
        </button>
      </form>
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
      {warnings.length > 0 && (
        <ul className="warn" data-testid="model-warnings" title="What a run under the current config will not fit this model; change the limits, or expect it">
          {warnings.map((w) => (
            <li key={w}>{w}</li>
          ))}
        </ul>
      )}
      <ProvenanceView />
      <div className="buttons">
        <button
          type="button"
          data-testid="export-weights"
          disabled={!free}
          onClick={() => void exportWeights()}
          title="one .tar: the toy's model.safetensors, config.json, tokenizer.json, selfcest.json; a Hugging Face model's folder (or its LoRA adapter); and provenance.json"
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
