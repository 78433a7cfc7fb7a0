/**
 * How many tokens a text root writes in the teachers' demonstrations (docs/TRAINING.md, "How long a
 * text root is"): `npx tsx scripts/textRootLengths.ts DIR [N]` renders N (default 200) arithmetic
 * problems' monolithic, expert and naive delegating demonstrations in the text protocol under the tokenizer
 * of the model folder DIR (one made by `init --family`), and prints the quantiles of the tokens the
 * root writes (each assistant turn and its end of turn) in the folder's prompt set.
 */
import { loadHfTextModel } from '../src/core/io/hfTextModel';
import { Rng } from '../src/core/rng';
import { defaultRolloutConfig } from '../src/core/runConfigTargets';
import { textPrompts } from '../src/core/protocol/prompts';
import { renderTextDemo } from '../src/core/sft/textDemos';
import { withOptions } from '../src/core/tasks';
import type { Demonstration } from '../src/core/tasks/types';
import { initBackend } from '../src/runtime/backend';
import { nodeFolderReader } from '../src/runtime/node/folderReader';

const [dir, n = '200'] = process.argv.slice(2);
if (dir === undefined) {
  console.error('usage: npx tsx scripts/textRootLengths.ts MODEL_DIR [N]');
  process.exit(2);
}
await initBackend('cpu');
const tok = (await loadHfTextModel(nodeFolderReader(dir), 'float32')).model.tokenizer;
const { task, opts } = withOptions('arithmetic', {});
const limits = defaultRolloutConfig('arithmetic');
const rng = new Rng(11);
const prompts = textPrompts(tok.prompts);
/** The root's written tokens: each assistant turn and its end of turn. */
const rootTokens = (demo: Demonstration) =>
  renderTextDemo(demo, prompts)
    .root.messages.filter((m) => m.role === 'assistant')
    .reduce((k, m) => k + tok.encode(m.content, false).length + 1, 0);
const rows: { mono: number; expert: number; naive: number; chars: number }[] = [];
for (let i = 0; i < Number(n); i++) {
  const p = task.generate(rng, opts, `lengths-${i}`);
  const mono = task.teacherMono(p, rng);
  const expert = task.teacherDelegate(p, rng, limits, 'expert');
  const naive = task.teacherDelegate(p, rng, limits, 'naive');
  if (expert && naive) rows.push({ mono: rootTokens(mono), expert: rootTokens(expert), naive: rootTokens(naive), chars: p.prompt.length });
}
const quantile = (xs: number[], f: number) => [...xs].sort((a, b) => a - b)[Math.floor(f * (xs.length - 1))];
const line = (name: string, xs: number[]) => console.log(`${name}: median ${quantile(xs, 0.5)}, p75 ${quantile(xs, 0.75)}, p90 ${quantile(xs, 0.9)}`);
console.log(`${dir}: ${prompts.name} prompts, ${rows.length} problems`);
line(
  'monolithic chain',
  rows.map((r) => r.mono),
);
line(
  'expert delegation',
  rows.map((r) => r.expert),
);
line(
  'naive delegation',
  rows.map((r) => r.naive),
);
const long = rows.filter((r) => r.chars >= 20);
line(
  `monolithic chain, problems of at least 20 characters (${long.length})`,
  long.map((r) => r.mono),
);
line(
  `expert delegation, problems of at least 20 characters (${long.length})`,
  long.map((r) => r.expert),
);
