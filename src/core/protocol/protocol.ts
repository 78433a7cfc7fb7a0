/**
 * The protocol seam: how a model's contexts read and write delegation. The rollout scheduler
 * (rollout/scheduler.ts) drives every model through one of these and never looks behind it:
 *
 *   tokens  the toy's token grammar (grammar.ts): `<root>` prompt, spawn blocks `<spawn> … <bN>`,
 *           `<join>`, the runtime's `<ret> … <resume>`, `<ans> … <eos>`;
 *   text    tool calls in text under a model's chat template (textProtocol.ts): the reference's
 *           spawn_clone calls, tool responses, a last line `Answer: …`.
 *
 * A protocol builds the prompts, parses what a context writes token by token, and writes what
 * the runtime injects after a round. The scheduler keeps what is common: slots, sampling, the
 * root's token limit, clone budgets, the model's window, the trace.
 */
import type { EpisodeLimits } from '../rollout/config';
import type { Problem } from '../tasks/types';
import type { Violation } from './violations';

/** A violation the protocol records without ending the context (the text protocol drops a malformed call and goes on). */
export interface ProtocolNote {
  violation: Violation;
  detail: string;
}

/** A clone a root's round starts: its subtask as the root wrote it, its budget and its prompt. */
export interface CloneStart {
  subtask: string;
  budget: number;
  prompt: number[];
}

/** What one token of a root does. `notes`: violations recorded on the way, the context going on. */
export type RootEvent =
  | { kind: 'continue' }
  | { kind: 'spawn'; clones: CloneStart[]; notes?: ProtocolNote[] }
  | { kind: 'final'; answer: string; notes?: ProtocolNote[] }
  /** `inSpawn`: the turn asked for a round that cannot start (the scheduler's limits are checked first). */
  | { kind: 'violation'; violation: Violation; detail: string; notes?: ProtocolNote[]; inSpawn?: boolean };

export type CloneEvent = { kind: 'continue' } | { kind: 'final'; answer: string } | { kind: 'violation'; violation: Violation; detail: string };

/** A root context's parser, from its first generated token to its answer. */
export interface RootTurns {
  feed(id: number): RootEvent;
  /** Spawn rounds started so far. */
  readonly roundsDone: number;
  /** The tokens the runtime injects after a round, given each clone's answer (null: none); the parser reads on after them. */
  resume(answers: readonly (string | null)[]): number[];
}

export interface CloneTurns {
  feed(id: number): CloneEvent;
}

export interface RootStart {
  /** The problem's text as this root reads it (the trace's `prompt`). */
  promptText: string;
  prompt: number[];
  turns: RootTurns;
}

export interface Protocol {
  readonly name: 'tokens' | 'text';
  /**
   * A root for `problem` under `limits`. `allowSpawn` false: the monolithic method (the root
   * answers alone). `limitInPrompt`: the root is told its token limit (a protocol with no form for
   * it throws).
   */
  root(problem: Problem, limits: EpisodeLimits, o: { allowSpawn: boolean; limitInPrompt: boolean }): RootStart;
  clone(start: CloneStart): CloneTurns;
  /** Ids the root may not sample in a monolithic run (the token grammar masks its spawn tokens). */
  banned(allowSpawn: boolean): ReadonlySet<number>;
  /** A context's text (the trace's `text`). */
  decode(ids: readonly number[]): string;
  /** Each token's own text, where the model's tokens are subwords (the trace's `pieces`); absent for the toy. */
  pieces?(ids: readonly number[]): string[];
}
