import { describe, expect, it } from 'vitest';
import { Rng } from '../rng';
import { Tokenizer } from '../tokenizer/tokenizer';
import { T, VOCAB_SIZE } from '../tokenizer/vocab';
import { CloneParser, type ParseEvent, RootParser, clonePrompt, contextChunk, extractAnswer, fanOut, joinInjection } from './grammar';
import { VIOLATIONS } from './violations';

const tok = Tokenizer.builtin();
const limits = { maxClonesPerRound: 4, maxRounds: 2, budgets: [8, 16, 32, 64, 128] };

/** Feed text to a parser; returns the first event that is not 'continue' (or continue). */
function run(parser: RootParser | CloneParser, text: string): ParseEvent {
  for (const id of tok.encode(text)) {
    const e = parser.feed(id);
    if (e.kind !== 'continue') return e;
  }
  return { kind: 'continue' };
}

describe('root parser', () => {
  it('reads a monolithic answer', () => {
    expect(run(new RootParser(limits), '=3+4=7<ans>7<eos>')).toEqual({ kind: 'final', answer: '7' });
  });

  it('reads spawn blocks and joins, then the answer after resume', () => {
    const p = new RootParser(limits);
    const e = run(p, '<spawn>3+4<b16><spawn>-2*9<b32><join>');
    expect(e.kind).toBe('join');
    if (e.kind !== 'join') return;
    expect(e.blocks.map((b) => [tok.decode(b.subtask), b.budget])).toEqual([
      ['3+4', 16],
      ['-2*9', 32],
    ]);
    p.resume();
    expect(run(p, '=7-18=-11<ans>-11<eos>')).toEqual({ kind: 'final', answer: '-11' });
  });

  const cases: [string, string][] = [
    ['<spawn>3+4<join>', 'malformed_spawn'], // no budget
    ['<spawn><b16>', 'malformed_spawn'], // empty subtask
    ['<spawn>3+4<eos>', 'malformed_spawn'], // unclosed
    ['<join>', 'malformed_spawn'], // join without spawn
    ['<b16>', 'malformed_spawn'], // budget outside a block
    ['<spawn>1<b8><ans>1<eos>', 'malformed_spawn'], // answer while spawns wait
    ['<spawn>1<b8><spawn>1<b8><spawn>1<b8><spawn>1<b8><spawn>', 'too_many_clones'],
    ['=7<eos>', 'root_no_answer'],
    ['<ans><eos>', 'root_no_answer'],
    ['<ans>7<spawn>', 'root_no_answer'],
    ['=7<ret>', 'reserved_token'],
    ['<sep>', 'reserved_token'],
  ];
  it.each(cases)('classifies %s as %s', (text, expected) => {
    const e = run(new RootParser(limits), text);
    expect(e.kind).toBe('violation');
    if (e.kind === 'violation') expect(e.violation).toBe(expected);
  });

  it('refuses a spawn after the last round', () => {
    const p = new RootParser({ ...limits, maxRounds: 1 });
    expect(run(p, '<spawn>1<b8><join>').kind).toBe('join');
    p.resume();
    const e = run(p, '=1<spawn>');
    expect(e).toMatchObject({ kind: 'violation', violation: 'too_many_rounds' });
  });

  it('refuses a budget outside the configured buckets', () => {
    const e = run(new RootParser({ ...limits, budgets: [16, 32] }), '<spawn>1+1<b8>');
    expect(e).toMatchObject({ kind: 'violation', violation: 'malformed_spawn' });
    if (e.kind === 'violation') expect(e.detail).toMatch(/budget 8 is not allowed/);
  });
});

describe('clone parser', () => {
  it('reads an answer', () => {
    expect(run(new CloneParser(), '=56+1=57<ans>57<eos>')).toEqual({ kind: 'final', answer: '57' });
  });
  it.each([
    ['<spawn>', 'clone_spawn'],
    ['=1<join>', 'clone_spawn'],
    ['<b16>', 'clone_spawn'],
    ['=57<eos>', 'clone_no_answer'],
    ['<ans><eos>', 'clone_no_answer'],
    ['<resume>', 'reserved_token'],
  ])('classifies %s as %s', (text, expected) => {
    expect(run(new CloneParser(), text)).toMatchObject({ kind: 'violation', violation: expected });
  });
});

describe('prompts and injection', () => {
  it('expands context keys into the clone prompt', () => {
    const r = clonePrompt(tok.encode('who is in <ctx>k2?'), { k2: 'ana is in rome.' }, (t) => tok.encode(t));
    expect('tokens' in r && tok.decode(r.tokens)).toBe('<clone>who is in ana is in rome.?<sep>');
    expect(clonePrompt(tok.encode('<ctx>k9'), { k2: 'x' }, (t) => tok.encode(t))).toEqual({ error: 'unknown context key "k9"' });
    expect(clonePrompt(tok.encode('<ctx>?'), {}, (t) => tok.encode(t))).toEqual({ error: '<ctx> without a key' });
  });

  it('finds only the own keys of a context, never what a plain object inherits', () => {
    const context = { k1: 'qx=7.' };
    // The keys a model can spell with the vocabulary (lowercase, digits, '_') …
    for (const key of ['constructor', '__proto__', 'tostring', 'valueof', 'hasownproperty']) {
      expect(clonePrompt(tok.encode(`<ctx>${key} qx?`), context, (t) => tok.encode(t))).toEqual({ error: `unknown context key ${JSON.stringify(key)}` });
    }
    // … and the lookup itself for every name Object.prototype has.
    for (const key of Object.getOwnPropertyNames(Object.prototype)) expect(contextChunk(context, key)).toBeUndefined();
    expect(contextChunk(context, 'k1')).toBe('qx=7.');
    expect(contextChunk(undefined, 'k1')).toBeUndefined();
    // A context that came through JSON with an own '__proto__' entry is read as data.
    expect(contextChunk(JSON.parse('{"__proto__":"ab=1."}') as Record<string, string>, '__proto__')).toBe('ab=1.');
  });

  it('injects answers cut to the limit and failure markers', () => {
    const ids = joinInjection(['12345', null, '-7'], 3, (t) => tok.encode(t));
    expect(tok.decode(ids)).toBe('<ret>123<ret><fail><ret>-7<resume>');
  });

  it('extracts the last complete answer block', () => {
    expect(extractAnswer(tok.encode('=1<ans>12<eos>'))).toBe('12');
    expect(extractAnswer(tok.encode('=1<ans><eos>'))).toBeNull();
    expect(extractAnswer(tok.encode('=1<ans>12'))).toBeNull();
    expect(extractAnswer(tok.encode('<ans>1<join>2<eos>'))).toBeNull();
  });
});

describe('fuzz: model output never throws', () => {
  it('classifies 10,000 random token sequences for root and clone', () => {
    const rng = new Rng(7);
    const seen = new Set<string>();
    const allowed = new Set<string>(['final', 'join', 'unfinished', ...VIOLATIONS]);
    for (let n = 0; n < 10_000; n++) {
      const len = rng.int(1, 64);
      // Bias towards protocol tokens so that the interesting paths are exercised.
      const seq = Array.from({ length: len }, () => (rng.bool(0.5) ? rng.int(0, 20) : rng.int(0, VOCAB_SIZE - 1)));
      for (const role of ['root', 'clone'] as const) {
        const p = role === 'root' ? new RootParser(limits) : new CloneParser();
        let outcome = 'unfinished';
        for (const id of seq) {
          const e = p.feed(id);
          if (e.kind === 'join' && p instanceof RootParser) {
            p.resume();
            continue;
          }
          if (e.kind !== 'continue') {
            outcome = e.kind === 'violation' ? e.violation : e.kind;
            break;
          }
        }
        expect(allowed.has(outcome)).toBe(true);
        seen.add(outcome);
      }
      expect(extractAnswer(seq) === null || typeof extractAnswer(seq) === 'string').toBe(true);
    }
    // Random sequences reach the common classes (the rarer ones have their own cases above).
    for (const v of ['malformed_spawn', 'root_no_answer', 'reserved_token', 'clone_spawn', 'clone_no_answer']) expect(seen).toContain(v);
    expect(seen).toContain('final');
    expect(T.eos).toBe(1);
  });

  it('fans a <ctx>* block out over the context in key order, and passes other blocks through', () => {
    const t = Tokenizer.builtin();
    const enc = (x: string) => t.encode(x);
    const context = { k1: 'a5.', k2: 'bc.', k3: 'c7.' };
    const r = fanOut(
      [
        { subtask: enc('1+2'), budget: 16 },
        { subtask: enc('<ctx>* b?'), budget: 8 },
      ],
      context,
    );
    if ('error' in r) throw new Error(r.error);
    expect(r.blocks.map((b) => [t.decode(b.subtask), b.budget])).toEqual([
      ['1+2', 16],
      ['<ctx>k1 b?', 8],
      ['<ctx>k2 b?', 8],
      ['<ctx>k3 b?', 8],
    ]);
    // Text around the fan-out is kept; a chunk that is not a string, or a key `<ctx>` could not name, is left out.
    const around = fanOut([{ subtask: enc('find <ctx>* now'), budget: 8 }], { k9: 'x', k2: 5 as unknown as string, 'a-b': 'y' });
    expect('error' in around ? around.error : around.blocks.map((b) => t.decode(b.subtask))).toEqual(['find <ctx>k9 now']);
    expect(fanOut([{ subtask: enc('<ctx>*1 b?'), budget: 8 }], context)).toEqual({ error: '<ctx>* followed by the key character "1"' });
    expect(fanOut([{ subtask: enc('<ctx>* <ctx>* b?'), budget: 8 }], context)).toEqual({ error: 'more than one <ctx>* in a spawn block' });
    expect(fanOut([{ subtask: enc('<ctx>* b?'), budget: 8 }], undefined)).toEqual({ error: '<ctx>* with no context to fan out over' });
    expect(fanOut([{ subtask: enc('<ctx>* b?'), budget: 8 }], {})).toEqual({ error: '<ctx>* with no context to fan out over' });
  });
});
