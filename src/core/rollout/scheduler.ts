/**
 * The batched rollout scheduler: many episodes (each a root and its clones) advance
 * together, and every decode step feeds all runnable contexts of all episodes to the
 * decoder in one batch.
 *
 * A root that writes <join> waits; its clones start in fresh contexts with their budgets;
 * when the last clone of the round ends (answer, budget spent or violation) the runtime
 * injects the answers and the root resumes. Each episode samples from its own Rng, so an
 * episode's tokens do not depend on what else shares the batch.
 */
import { sampleFromLogits } from '../model/sample';
import type { CloneEvent, CloneTurns, Protocol, ProtocolNote, RootEvent, RootTurns } from '../protocol/protocol';
import { tokenProtocol } from '../protocol/tokenProtocol';
import type { Violation } from '../protocol/violations';
import type { Rng } from '../rng';
import type { Problem, Task, Verdict } from '../tasks/types';
import type { EpisodeLimits, RolloutConfig } from './config';
import { type ContextTrace, type EpisodeEvent, type EpisodeTrace, TRACE_SCHEMA, type Writer, countTokens } from './trace';

/** What the scheduler needs from a model: contexts in slots, fed tokens, logits back. */
export interface ContextDecoder {
  readonly vocabSize: number;
  /** Longest context the model can hold. */
  readonly maxPositions: number;
  open(): number;
  close(slot: number): void;
  /** Append each slot's tokens; logits after each slot's last token, [slots.length × vocab]. */
  feed(slots: number[], tokens: number[][]): Promise<Float32Array>;
  /** How the model's contexts read and write delegation, where it is not the toy's token grammar (a Hugging Face model's text protocol). */
  readonly protocol?: Protocol;
}

class LiveEpisode {
  readonly contexts: ContextTrace[] = [];
  readonly events: EpisodeEvent[] = [];
  readonly violations: EpisodeTrace['violations'] = [];
  answer: string | null = null;
  finished = false;
  /** Clones of the current round still running. */
  running = new Set<LiveContext>();
  round: LiveContext[] = [];
  /** Opened by addEpisode right after construction (the root's context points back here). */
  root!: LiveContext;

  constructor(
    readonly problem: Problem,
    readonly promptText: string,
    /** The task's verifier on this episode's problem. */
    readonly verify: (answer: string | null) => Verdict,
    readonly rng: Rng,
    /** This episode's limits: the scheduler's, with any the episode's task sets (addEpisode). */
    readonly limits: EpisodeLimits,
  ) {}
}

interface LiveContext {
  trace: ContextTrace;
  episode: LiveEpisode;
  slot: number;
  parser: RootTurns | CloneTurns;
  rng: Rng;
  /** Tokens to feed at the next step (prompt, injection, or the last sampled token). */
  pending: number[];
  finished: boolean;
}

/** One sampled token, for live views and the token-by-token stepper. */
export interface TokenEvent {
  episode: number;
  context: number;
  role: 'root' | 'clone';
  token: number;
  logprob: number;
  /** Offset of this context's row in `logits`. */
  logits: Float32Array;
  offset: number;
}

export interface SchedulerOptions {
  policyVersion: number;
  /** The toy tokenizer's encode (the token protocol's prompts and injections). */
  encode: (text: string) => number[];
  /** How contexts read and write delegation (protocol/protocol.ts); default the decoder's, else the toy's token grammar. */
  protocol?: Protocol;
  onToken?: (e: TokenEvent) => void;
}

export class RolloutScheduler {
  private readonly episodes: LiveEpisode[] = [];
  private live: LiveContext[] = [];
  private readonly banned: ReadonlySet<number>;
  private readonly protocol: Protocol;
  private steps = 0;

  constructor(
    private readonly decoder: ContextDecoder,
    private readonly cfg: RolloutConfig,
    private readonly opts: SchedulerOptions,
  ) {
    this.protocol = opts.protocol ?? decoder.protocol ?? tokenProtocol(opts.encode, cfg.answerMaxChars);
    this.banned = this.protocol.banned(cfg.allowSpawn);
  }

  /**
   * Start an episode; returns its index in results(). `limits` replaces the scheduler's
   * spawn and root limits for this episode only (a task mix rolls out each task under its own).
   */
  addEpisode<O>(task: Task<O>, problem: Problem, rng: Rng, limits: Partial<EpisodeLimits> = {}): number {
    const own: EpisodeLimits = {
      budgets: limits.budgets ?? this.cfg.budgets,
      maxClonesPerRound: limits.maxClonesPerRound ?? this.cfg.maxClonesPerRound,
      maxRounds: limits.maxRounds ?? this.cfg.maxRounds,
      rootMaxTokens: limits.rootMaxTokens ?? this.cfg.rootMaxTokens,
    };
    const { promptText, prompt, turns } = this.protocol.root(problem, own, {
      allowSpawn: this.cfg.allowSpawn,
      limitInPrompt: this.cfg.rootLimitMin !== undefined,
    });
    const episode = new LiveEpisode(problem, promptText, (answer) => task.verify(problem, answer), rng, own);
    episode.root = this.openContext(episode, {
      role: 'root',
      parent: null,
      round: null,
      subtask: null,
      budget: null,
      prompt,
      parser: turns,
    });
    if (prompt.length >= this.decoder.maxPositions) {
      // Not an error: a context that does not fit is a measured failure of the method.
      this.endRoot(episode.root, 'root_over_max', `the prompt has ${prompt.length} tokens; the model holds ${this.decoder.maxPositions}`);
    }
    this.episodes.push(episode);
    return this.episodes.length - 1;
  }

  get done(): boolean {
    return this.live.every((c) => c.finished);
  }

  get stepCount(): number {
    return this.steps;
  }

  /** Contexts currently holding a decoder slot (for the live view). */
  liveContexts(): { episode: number; context: number; role: 'root' | 'clone'; waiting: boolean }[] {
    return this.live.map((c) => ({
      episode: this.episodes.indexOf(c.episode),
      context: c.trace.id,
      role: c.trace.role,
      waiting: c.pending.length === 0,
    }));
  }

  /** One batched decode step over every runnable context. Returns how many were fed. */
  async step(): Promise<number> {
    this.live = this.live.filter((c) => !c.finished);
    const runnable = this.live.filter((c) => c.pending.length > 0);
    if (runnable.length === 0) {
      if (this.live.length > 0) throw new Error('rollout deadlock: live contexts but none runnable');
      return 0;
    }
    // Prefills and injections (several tokens) go in their own call so that the common
    // one-token rows are not padded to the longest prefill.
    const single = runnable.filter((c) => c.pending.length === 1);
    const multi = runnable.filter((c) => c.pending.length > 1);
    for (const group of [multi, single]) {
      if (group.length === 0) continue;
      const logits = await this.decoder.feed(
        group.map((c) => c.slot),
        group.map((c) => c.pending),
      );
      group.forEach((c, row) => this.advance(c, logits, row * this.decoder.vocabSize));
    }
    this.live = this.live.filter((c) => !c.finished);
    this.steps++;
    return runnable.length;
  }

  /** Run until every episode has finished; `onProgress` hears each time the count of finished episodes grows. */
  async run(onProgress?: (finished: number, episodes: number) => void): Promise<EpisodeTrace[]> {
    let reported = 0;
    while (!this.done) {
      await this.step();
      if (onProgress === undefined) continue;
      const finished = this.episodes.reduce((n, e) => n + (e.finished ? 1 : 0), 0);
      if (finished > reported) onProgress((reported = finished), this.episodes.length);
    }
    return this.results();
  }

  results(): EpisodeTrace[] {
    return this.episodes.map((e) => this.toTrace(e));
  }

  private openContext(
    episode: LiveEpisode,
    spec: Pick<ContextTrace, 'role' | 'parent' | 'round' | 'subtask' | 'budget'> & { prompt: number[]; parser: RootTurns | CloneTurns },
  ): LiveContext {
    const trace: ContextTrace = {
      id: episode.contexts.length,
      role: spec.role,
      parent: spec.parent,
      round: spec.round,
      subtask: spec.subtask,
      budget: spec.budget,
      tokens: [...spec.prompt],
      text: '',
      writers: 'p'.repeat(spec.prompt.length),
      logprobs: [],
      generatedTokens: 0,
      answer: null,
      violation: null,
      violationDetail: null,
    };
    episode.contexts.push(trace);
    const ctx: LiveContext = {
      trace,
      episode,
      slot: this.decoder.open(),
      parser: spec.parser,
      rng: episode.rng.fork(),
      pending: [...spec.prompt],
      finished: false,
    };
    this.live.push(ctx);
    return ctx;
  }

  private advance(c: LiveContext, logits: Float32Array, offset: number): void {
    const { id, logprob } = sampleFromLogits(
      logits,
      offset,
      this.decoder.vocabSize,
      { temperature: this.cfg.temperature, topK: this.cfg.topK, greedy: this.cfg.greedy },
      c.rng,
      this.banned,
    );
    this.append(c, [id], 'g');
    c.trace.logprobs.push(logprob);
    c.trace.generatedTokens++;
    c.pending = [id];
    this.opts.onToken?.({
      episode: this.episodes.indexOf(c.episode),
      context: c.trace.id,
      role: c.trace.role,
      token: id,
      logprob,
      logits,
      offset,
    });
    if (c.trace.role === 'root') this.onRootEvent(c, (c.parser as RootTurns).feed(id));
    else this.onCloneEvent(c, (c.parser as CloneTurns).feed(id));
  }

  /** Violations the protocol recorded while the context goes on: the episode's list, and the context's first. */
  private note(c: LiveContext, notes: readonly ProtocolNote[] | undefined): void {
    for (const n of notes ?? []) {
      c.episode.violations.push({ violation: n.violation, context: c.trace.id, detail: n.detail });
      if (c.trace.violation === null) {
        c.trace.violation = n.violation;
        c.trace.violationDetail = n.detail;
      }
    }
  }

  private onRootEvent(root: LiveContext, e: RootEvent): void {
    const ep = root.episode;
    if (e.kind !== 'continue') this.note(root, e.notes);
    switch (e.kind) {
      case 'final':
        ep.answer = e.answer;
        root.trace.answer = e.answer;
        this.finish(root);
        ep.finished = true;
        return;
      case 'violation':
        if (e.inSpawn === true && root.trace.generatedTokens >= ep.limits.rootMaxTokens) {
          return this.endRoot(root, 'root_over_max', `root generated ${root.trace.generatedTokens} tokens (max ${ep.limits.rootMaxTokens})`);
        }
        this.violate(root, e.violation, e.detail);
        ep.finished = true;
        return;
      case 'spawn': {
        // A spawn on the root's last allowed token: it could not read the answers, so the round does not start.
        if (root.trace.generatedTokens >= ep.limits.rootMaxTokens) {
          return this.endRoot(root, 'root_over_max', `root generated ${root.trace.generatedTokens} tokens (max ${ep.limits.rootMaxTokens})`);
        }
        const round = (root.parser as RootTurns).roundsDone;
        for (const clone of e.clones) {
          if (clone.prompt.length + clone.budget > this.decoder.maxPositions) {
            return this.endRoot(root, 'malformed_spawn', `clone prompt (${clone.prompt.length}) plus budget (${clone.budget}) exceeds the context`);
          }
        }
        // The root waits; its last token is fed together with the injected answers on resume.
        root.pending = [];
        ep.round = e.clones.map((clone) =>
          this.openContext(ep, {
            role: 'clone',
            parent: root.trace.id,
            round,
            subtask: clone.subtask,
            budget: clone.budget,
            prompt: clone.prompt,
            parser: this.protocol.clone(clone),
          }),
        );
        ep.running = new Set(ep.round);
        ep.events.push({ kind: 'spawn', round, atToken: root.trace.tokens.length - 1, clones: ep.round.map((c) => c.trace.id) });
        // A round whose every objective was refused has nothing to wait for.
        if (ep.round.length === 0) this.resumeRoot(ep);
        return;
      }
      case 'continue':
        if (root.trace.generatedTokens >= ep.limits.rootMaxTokens) {
          this.endRoot(root, 'root_over_max', `root generated ${root.trace.generatedTokens} tokens (max ${ep.limits.rootMaxTokens})`);
        } else if (root.trace.tokens.length >= this.decoder.maxPositions) {
          this.endRoot(root, 'root_over_max', `root context is full (${this.decoder.maxPositions} tokens)`);
        }
    }
  }

  private onCloneEvent(clone: LiveContext, e: CloneEvent): void {
    if (e.kind === 'final') {
      clone.trace.answer = e.answer;
      this.finish(clone);
    } else if (e.kind === 'violation') {
      this.violate(clone, e.violation, e.detail);
    } else if (clone.trace.generatedTokens >= (clone.trace.budget ?? 0)) {
      this.violate(clone, 'clone_over_budget', `clone used its budget of ${clone.trace.budget} tokens without an answer`);
    } else {
      return;
    }
    const ep = clone.episode;
    ep.running.delete(clone);
    if (ep.running.size === 0) this.resumeRoot(ep);
  }

  private resumeRoot(ep: LiveEpisode): void {
    const root = ep.root;
    const turns = root.parser as RootTurns;
    const round = turns.roundsDone;
    const answers = ep.round.map((c) => c.trace.answer);
    const injected = turns.resume(answers);
    ep.events.push({ kind: 'join', round, atToken: root.trace.tokens.length, answers });
    if (root.trace.tokens.length + injected.length >= this.decoder.maxPositions) {
      this.endRoot(root, 'root_over_max', 'the joined answers do not fit in the root context');
      return;
    }
    // The token that ended the turn (a join, an end of turn) was sampled, not fed: it goes first.
    const last = root.trace.tokens[root.trace.tokens.length - 1];
    this.append(root, injected, 'i');
    root.pending = [last, ...injected];
  }

  private endRoot(root: LiveContext, v: Violation, detail: string): void {
    this.violate(root, v, detail);
    root.episode.finished = true;
  }

  private violate(c: LiveContext, v: Violation, detail: string): void {
    c.trace.violation = v;
    c.trace.violationDetail = detail;
    c.episode.violations.push({ violation: v, context: c.trace.id, detail });
    this.finish(c);
  }

  private finish(c: LiveContext): void {
    if (c.finished) return;
    c.finished = true;
    c.pending = [];
    this.decoder.close(c.slot);
  }

  private append(c: LiveContext, ids: number[], writer: Writer): void {
    c.trace.tokens.push(...ids);
    c.trace.writers += writer.repeat(ids.length);
  }

  private toTrace(ep: LiveEpisode): EpisodeTrace {
    const { decode, pieces } = this.protocol;
    const contexts = ep.contexts.map((c) => ({ ...c, text: decode(c.tokens), ...(pieces ? { pieces: pieces(c.tokens) } : {}) }));
    const verdict = ep.verify(ep.answer);
    return {
      schema: TRACE_SCHEMA,
      policyVersion: this.opts.policyVersion,
      task: ep.problem.task,
      problemId: ep.problem.id,
      prompt: ep.promptText,
      truth: ep.problem.truth,
      method: this.cfg.allowSpawn ? 'delegate' : 'mono',
      answer: ep.answer,
      correct: ep.finished && verdict.correct,
      rounds: (ep.root.parser as RootTurns).roundsDone,
      contexts,
      events: ep.events,
      violations: ep.violations,
      tokens: countTokens(contexts),
    };
  }
}
