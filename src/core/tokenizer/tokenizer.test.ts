import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Tokenizer } from './tokenizer';
import { buildTokenizerJson, tokenizerJsonError } from './tokenizerJson';
import { T, VOCAB, VOCAB_SIZE, budgetOfToken, budgetToken } from './vocab';

describe('tokenizer', () => {
  const tok = Tokenizer.builtin();

  it('encodes every vocabulary entry to its own id', () => {
    VOCAB.forEach((piece, id) => {
      if (piece === '<unk>') return;
      expect(tok.encode(piece)).toEqual([id]);
    });
  });

  it('round-trips task and protocol text', () => {
    const texts = [
      '<root>12+3*(4-5)<sep>=12+3*-1=12-3=9<ans>9<eos>',
      '<clone>7*8+1<sep>=56+1=57<ans>57<eos>',
      '<spawn>3+4<b16><spawn>-2*9<b32><join><ret>7<ret><fail><resume>',
      "who is the boss of ana? k1: ana's boss is bob.\n",
      '  leading and trailing spaces  ',
    ];
    for (const t of texts) expect(tok.decode(tok.encode(t))).toBe(t);
  });

  it('counts special tokens as single ids', () => {
    expect(tok.encode('<spawn>1<b16><join>')).toEqual([T.spawn, VOCAB.indexOf('1'), budgetToken(16), T.join]);
    expect(budgetOfToken(budgetToken(64))).toBe(64);
    expect(budgetOfToken(T.eos)).toBeUndefined();
  });

  it('rejects characters outside the vocabulary with a message naming them', () => {
    expect(() => tok.encode('3 ÷ 4')).toThrow(/"÷".*not in the vocabulary/);
    expect(() => tok.encode('ABC')).toThrow(/"A"/);
  });

  it('rejects a tokenizer.json that disagrees with the vocabulary', () => {
    const j = buildTokenizerJson();
    const swapped = { ...j, model: { ...j.model, vocab: { ...j.model.vocab, a: 0, '<pad>': VOCAB.indexOf('a') } } };
    expect(() => Tokenizer.fromJson(swapped)).toThrow(/has id/);
    expect(() => Tokenizer.fromJson({})).toThrow(/^tokenizer.json: model must be an object with the vocabulary \(got undefined\)$/);
  });

  it('takes a tokenizer.json by one check (tokenizerJsonError, which checkpoints use too): odd vocabularies and added tokens are refused by field', () => {
    const j = buildTokenizerJson();
    const cases: [unknown, RegExp][] = [
      [{}, /model must be an object with the vocabulary/],
      [{ ...j, model: { ...j.model, vocab: [...VOCAB] } }, /model\.vocab must be an object mapping each token to its id/],
      // An extra token whose id collides with "a"'s.
      [
        { ...j, model: { ...j.model, vocab: { ...j.model.vocab, zz: VOCAB.indexOf('a') } } },
        /model\.vocab has the token "zz" \(id \d+\), which is not in this vocabulary/,
      ],
      [
        { ...j, model: { ...j.model, vocab: Object.fromEntries(Object.entries(j.model.vocab).filter(([k]) => k !== 'q')) } },
        /model\.vocab lacks 1 token of this vocabulary \("q"\)/,
      ],
      [
        { ...j, added_tokens: [{ ...j.added_tokens[0], id: 5 }] },
        /added_tokens\[0\] gives "<pad>" the id 5, which is "<spawn>"'s|added_tokens\[0\] gives "<pad>" the id 5/,
      ],
      [{ ...j, added_tokens: {} }, /added_tokens must be a list/],
    ];
    for (const [json, message] of cases) {
      expect(tokenizerJsonError(json), JSON.stringify(message)).toMatch(message);
      expect(() => Tokenizer.fromJson(json)).toThrow(message);
    }
    expect(tokenizerJsonError(j)).toBeNull();
  });

  it('ships the same tokenizer.json as it builds', () => {
    const shipped = JSON.parse(readFileSync(new URL('../../../public/tokenizer.json', import.meta.url), 'utf8'));
    expect(shipped).toEqual(buildTokenizerJson());
    expect(Tokenizer.fromJson(shipped).vocabSize).toBe(VOCAB_SIZE);
  });
});
