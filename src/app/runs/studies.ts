/**
 * Recorded CLI studies the Runs panel opens side by side: the run folders' own metrics.jsonl and
 * run.json, bundled as lazy chunks (fetched from the page's own origin on the first click, never
 * from outside) and read as any imported CLI run is (cliRun.ts).
 *
 * The gating ablation where clones break the protocol (docs/TRAINING.md, "Gating where clones
 * break the protocol"): GRPO from the warm start taught with sloppy clones, three paired seeds ×
 * the reference gate, the protocol gate and no gating, 150 steps each.
 */
import type { PickedText } from './cliRun';

const FILES = import.meta.glob(['/runs/ablation-sloppy/*/metrics.jsonl', '/runs/ablation-sloppy/*/run.json'], {
  query: '?raw',
  import: 'default',
}) as Record<string, () => Promise<string>>;

export interface StudyRun {
  /** The kept run's name (a study's runs are found again by it). */
  name: string;
  /** The run folder, from the repository root. */
  dir: string;
}

export interface RecordedStudy {
  id: string;
  title: string;
  /** One sentence: what was run and what came out. */
  summary: string;
  /** The overlay metric of the comparison's fourth chart (OVERLAY_METRICS id): what the study is about. */
  metric: string;
  runs: readonly StudyRun[];
}

const ARMS = [
  { arm: 'reference', label: 'reference gate' },
  { arm: 'protocol', label: 'protocol gate' },
  { arm: 'none', label: 'no gating' },
] as const;

export const STUDIES: readonly RecordedStudy[] = [
  {
    id: 'gating-ablation',
    title: 'Gating ablation, sloppy clones',
    summary:
      'GRPO from the warm start whose clones often ramble past their budgets: 3 paired seeds × reference gate, protocol gate, no gating, 150 steps each. The gated runs give up delegation; the ungated ones keep it.',
    metric: 'clones:delegating',
    runs: ARMS.flatMap(({ arm, label }) => [1, 2, 3].map((seed) => ({ name: `gating: ${label}, seed ${seed}`, dir: `runs/ablation-sloppy/${arm}-s${seed}` }))),
  },
];

export function studyById(id: string): RecordedStudy {
  const s = STUDIES.find((x) => x.id === id);
  if (!s) throw new Error(`no recorded study "${id}" (the studies: ${STUDIES.map((x) => x.id).join(', ')})`);
  return s;
}

/** A run's files as an import reads them (metrics.jsonl and run.json); throws naming a file the build lacks. */
export async function studyRunFiles(run: StudyRun): Promise<PickedText[]> {
  return Promise.all(
    ['metrics.jsonl', 'run.json'].map(async (name) => {
      const load = FILES[`/${run.dir}/${name}`];
      if (!load) throw new Error(`${run.dir}/${name} is not in this build`);
      return { name, text: await load() };
    }),
  );
}
