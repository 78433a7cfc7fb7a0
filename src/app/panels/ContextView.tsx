/** One context's whole text, token by token, coloured by who wrote it (prompt, model, runtime). */
import type { ContextTrace } from '../../core/rollout/trace';
import { WRITER_NAMES, contextPieces } from '../tokens/tokenText';

export function TokenText({ ctx }: { ctx: Pick<ContextTrace, 'tokens' | 'writers' | 'spans' | 'pieces'> }) {
  // A text-only context (another trainer's rollout): its text by writer, no token ids.
  if (ctx.spans) {
    return (
      <div className="tokens" data-testid="text-only">
        {ctx.spans.map((s, i) => (
          <span key={i} className={`tok w-${s.writer}`} data-writer={s.writer} title={`${WRITER_NAMES[s.writer]} text`}>
            {s.text}
          </span>
        ))}
      </div>
    );
  }
  return (
    <div className="tokens">
      {contextPieces(ctx).map((p, i) => (
        <span
          key={i}
          className={`tok w-${p.writer}${p.special ? ' special' : ''}`}
          data-writer={p.writer}
          title={`#${i} ${WRITER_NAMES[p.writer]} (id ${ctx.tokens[i]})`}
        >
          {p.text}
        </span>
      ))}
    </div>
  );
}

export function WriterLegend() {
  return (
    <span className="legend">
      <span className="tok w-p">prompt</span> <span className="tok w-g">generated</span> <span className="tok w-i">injected</span>
    </span>
  );
}

export function ContextView({ ctx }: { ctx: ContextTrace }) {
  const facts = [
    ctx.role === 'root' ? `root #${ctx.id}` : `clone #${ctx.id} of #${ctx.parent} · round ${ctx.round}`,
    ctx.budget !== null ? `budget ${ctx.budget}` : null,
    ctx.spans
      ? `${ctx.generatedTokens} generated tokens (text only: the source's token count)`
      : `${ctx.generatedTokens} generated / ${ctx.tokens.length} tokens`,
    `answer ${ctx.answer ?? '∅'}`,
    ctx.credit
      ? `reward ${ctx.credit.reward.toFixed(3)} · advantage ${ctx.credit.advantage.toFixed(3)} · weight ${ctx.credit.weight.toFixed(3)}${ctx.credit.gated ? ' · gated' : ''}`
      : null,
  ].filter(Boolean);
  return (
    <div className="context-view" data-testid="context-view" data-context={ctx.id}>
      <div className="context-head">
        {facts.join(' · ')} <WriterLegend />
      </div>
      {ctx.violation && (
        <div className="bad small">
          {ctx.violation}: {ctx.violationDetail}
        </div>
      )}
      <TokenText ctx={ctx} />
    </div>
  );
}
