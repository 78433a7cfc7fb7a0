/** The delegation tree of an episode as readable text (CLI output, logs). */
import type { ContextTrace, EpisodeTrace } from './trace';

function generatedText(c: ContextTrace): string {
  // Prompt tokens are the leading 'p' run; everything after is the model's and the runtime's.
  const start = c.writers.indexOf('g');
  if (start < 0) return '';
  let s = '';
  let pos = 0;
  for (const piece of splitPieces(c.text)) {
    if (pos >= start) s += piece;
    pos++;
  }
  return s;
}

/** Split decoded text back into one piece per token (special tokens are `<name>`). */
function splitPieces(text: string): string[] {
  return text.match(/<[a-z0-9]+>|[\s\S]/g) ?? [];
}

function outcome(c: ContextTrace): string {
  if (c.violation) return `✗ ${c.violation}`;
  return c.answer !== null ? `→ ${c.answer}` : '…';
}

export function formatEpisode(e: EpisodeTrace): string {
  const root = e.contexts[0];
  const lines = [
    `${e.task} ${e.problemId} [${e.method}]  ${e.prompt}`,
    `  truth ${e.truth}  answer ${e.answer ?? '—'}  ${e.correct ? 'correct' : 'wrong'}  rounds ${e.rounds}`,
    `root (${root.generatedTokens} tok) ${outcome(root)}`,
    `  ${generatedText(root)}`,
  ];
  const clones = e.contexts.filter((c) => c.role === 'clone');
  clones.forEach((c, i) => {
    const branch = i === clones.length - 1 ? '└─' : '├─';
    lines.push(
      `${branch} clone ${c.id} round ${c.round} budget ${c.budget} (${c.generatedTokens} tok) ${c.subtask} ${outcome(c)}`,
      `${i === clones.length - 1 ? '  ' : '│ '}   ${generatedText(c)}`,
    );
  });
  const t = e.tokens;
  lines.push(`tokens: root ${t.root}, clones ${t.clonesTotal}, critical path ${t.criticalPath}, total ${t.total}`);
  if (e.violations.length > 0) lines.push(`violations: ${e.violations.map((v) => `${v.violation} (context ${v.context})`).join(', ')}`);
  return lines.join('\n');
}
