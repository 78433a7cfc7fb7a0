/**
 * The toy's token grammar as a Protocol (protocol.ts): grammar.ts's parsers, prompts and join
 * injection behind the seam the scheduler drives.
 */
import type { EpisodeLimits } from '../rollout/config';
import type { Problem } from '../tasks/types';
import { VOCAB } from '../tokenizer/vocab';
import { CloneParser, RootParser, SPAWN_GRAMMAR, clonePrompt, fanOut, joinInjection, rootPrompt } from './grammar';
import type { CloneEvent, CloneStart, CloneTurns, Protocol, RootEvent, RootStart, RootTurns } from './protocol';

const NONE: ReadonlySet<number> = new Set();

/** The toy vocabulary's text of `ids` (an unknown id as `<?>`). */
export function vocabText(ids: readonly number[]): string {
  let s = '';
  for (const id of ids) s += VOCAB[id] ?? '<?>';
  return s;
}

class TokenRoot implements RootTurns {
  private readonly parser: RootParser;

  constructor(
    private readonly problem: Problem,
    private readonly limits: EpisodeLimits,
    private readonly encode: (text: string) => number[],
    private readonly answerMaxChars: number,
  ) {
    this.parser = new RootParser(limits);
  }

  get roundsDone(): number {
    return this.parser.roundsDone;
  }

  feed(id: number): RootEvent {
    const e = this.parser.feed(id);
    if (e.kind !== 'join') return e;
    const fanned = fanOut(e.blocks, this.problem.context);
    if ('error' in fanned) return { kind: 'violation', violation: 'malformed_spawn', detail: fanned.error, inSpawn: true };
    const blocks = fanned.blocks;
    if (blocks.length > this.limits.maxClonesPerRound) {
      return {
        kind: 'violation',
        violation: 'too_many_clones',
        detail: `the round's spawns fan out to ${blocks.length} clones (max ${this.limits.maxClonesPerRound})`,
        inSpawn: true,
      };
    }
    const clones: CloneStart[] = [];
    for (const block of blocks) {
      const p = clonePrompt(block.subtask, this.problem.context, this.encode);
      if ('error' in p) return { kind: 'violation', violation: 'malformed_spawn', detail: p.error, inSpawn: true };
      clones.push({ subtask: vocabText(block.subtask), budget: block.budget, prompt: p.tokens });
    }
    return { kind: 'spawn', clones };
  }

  resume(answers: readonly (string | null)[]): number[] {
    this.parser.resume();
    return joinInjection(answers, this.answerMaxChars, this.encode);
  }
}

class TokenClone implements CloneTurns {
  private readonly parser = new CloneParser();

  feed(id: number): CloneEvent {
    const e = this.parser.feed(id);
    if (e.kind === 'join') throw new Error('CloneParser: a clone never joins');
    return e;
  }
}

/** The token grammar over the toy tokenizer's `encode`; injected answers are cut to `answerMaxChars`. */
export function tokenProtocol(encode: (text: string) => number[], answerMaxChars: number): Protocol {
  return {
    name: 'tokens',
    root(problem: Problem, limits: EpisodeLimits, o: { allowSpawn: boolean; limitInPrompt: boolean }): RootStart {
      // Long-context tasks give the monolithic root the whole context instead of the keys.
      const promptText = o.allowSpawn ? problem.prompt : (problem.monoPrompt ?? problem.prompt);
      // A root that knows its limit is told this episode's.
      const prompt = rootPrompt(promptText, encode, o.limitInPrompt ? limits.rootMaxTokens : null);
      return { promptText, prompt, turns: new TokenRoot(problem, limits, encode, answerMaxChars) };
    },
    clone: () => new TokenClone(),
    banned: (allowSpawn) => (allowSpawn ? NONE : SPAWN_GRAMMAR),
    decode: vocabText,
  };
}
