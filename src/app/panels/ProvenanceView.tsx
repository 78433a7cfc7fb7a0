/** What produced the current weights (core/io/provenance.ts), oldest first: loads and training segments with their key settings. */
import type { ProvenanceEvent } from '../../core/io/provenance';
import { usePlayground } from '../state/store';

/** The settings shown inline; the full set is in the tooltip and in the export's provenance.json. */
const SHOWN: Record<'grpo' | 'sft', readonly string[]> = {
  grpo: ['lr', 'batch', 'group', 'miniBatch', 'gating', 'gateMode', 'credit', 'seed', 'rootMaxTokens', 'budgetRate'],
  sft: ['sftLr', 'sftTeacher', 'scheduleSteps', 'seed'],
};

function eventText(e: ProvenanceEvent): string {
  if (e.kind === 'load')
    return `load ${e.source} (${e.preset}${e.trainedBy ? `, trained by ${e.trainedBy === 'grpo' ? 'GRPO' : 'a warm start'}` : ''}) at v${e.policyVersion}`;
  const shown = SHOWN[e.kind].map((k) => `${k} ${JSON.stringify(e.settings[k])}`).join(', ');
  return `${e.kind === 'grpo' ? 'GRPO' : 'warm start'} steps ${e.firstStep}–${e.lastStep}, v${e.fromVersion}→v${e.toVersion}: ${shown}`;
}

export function ProvenanceView() {
  const events = usePlayground((s) => s.provenance);
  if (events.length === 0) return null;
  return (
    <details data-testid="provenance">
      <summary>
        History of these weights ({events.length} event{events.length === 1 ? '' : 's'})
      </summary>
      <ol className="small">
        {events.map((e, i) => (
          <li key={i} data-kind={e.kind} title={e.kind === 'load' ? e.at : `${e.startedAt} – ${e.endedAt}\n${JSON.stringify(e.settings)}`}>
            {eventText(e)}
          </li>
        ))}
      </ol>
    </details>
  );
}
