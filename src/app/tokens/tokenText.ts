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

export function contextPieces(ctx: Pick<ContextTrace, 'tokens' | 'writers'>): TokenPiece[] {
  return ctx.tokens.map((id, i) => ({ ...pieceOf(id), writer: asWriter(ctx.writers[i]) }));
}
