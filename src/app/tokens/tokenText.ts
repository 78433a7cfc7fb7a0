/** Token ids → display pieces, and who wrote them (prompt p, generated g, injected i). */
import { VOCAB } from '../../core/tokenizer/vocab';
import type { ContextTrace, Writer } from '../../core/rollout/trace';

export interface TokenPiece {
  text: string;
  special: boolean;
  writer: Writer;
}

export const WRITER_NAMES: Record<Writer, string> = { p: 'prompt', g: 'generated', i: 'injected' };

export function pieceOf(id: number): { text: string; special: boolean } {
  const t = VOCAB[id];
  if (t === undefined) return { text: `<${id}?>`, special: true };
  if (t === '\n') return { text: '↵', special: true };
  return { text: t, special: t.length > 1 };
}

function asWriter(c: string | undefined): Writer {
  return c === 'p' || c === 'i' ? c : 'g';
}

/** A subword's own text (a Hugging Face model's token), shown as the toy's are: a newline as ↵, a special token marked. */
function subwordPiece(piece: string): { text: string; special: boolean } {
  if (/^<\|.*\|>$|^<\/?tool_(call|response)>$/.test(piece)) return { text: piece, special: true };
  return { text: piece.replace(/\n/g, '↵'), special: false };
}

export function contextPieces(ctx: Pick<ContextTrace, 'tokens' | 'writers' | 'pieces'>): TokenPiece[] {
  const { pieces } = ctx;
  return ctx.tokens.map((id, i) => ({ ...(pieces ? subwordPiece(pieces[i]) : pieceOf(id)), writer: asWriter(ctx.writers[i]) }));
}
