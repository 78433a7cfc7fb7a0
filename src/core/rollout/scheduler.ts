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
import { CloneParser, type ParseEvent, RootParser, SPAWN_GRAMMAR, clonePrompt, fanOut, joinInjection, rootPrompt } from '../protocol/grammar';
import type { Violation } from '../protocol/violations';
import type { Rng } from '../rng';
import type { Problem, Task, Verdict } from '../tasks/types';
import { VOCAB } from '../tokenizer/vocab';
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
  parser: RootParser | CloneParser;
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
  encode: (text: string) => number[];
  onToken?: (e: TokenEvent) => void;
}

export class RolloutScheduler {
  private readonly episodes: LiveEpisode[] = [];
  private live: LiveContext[] = [];
  private readonly banned: ReadonlySet<number>;
  private steps = 0;

  constructor(
    private readonly decoder: ContextDecoder,
    private readonly cfg: RolloutConfig,
    private readonly opts: SchedulerOptions,
  ) {
    this.banned = cfg.allowSpawn ? new Set() : SPAWN_GRAMMAR;
  }

  /**
   * Start an episode; returns its index in results(). `limits` replaces the scheduler's
   * spawn and root limits for this episode only (a task mix rolls out each task under its own).
   */
  addEpisode<O>(task: Task<O>, problem: Problem, rng: Rng, limits: Partial<EpisodeLimits> = {}): number {
    // Long-context tasks give the monolithic root the whole context instead of the keys.
    const promptText = this.cfg.allowSpawn ? problem.prompt : (problem.monoPrompt ?? problem.prompt);
    const own: EpisodeLimits = {
      budgets: limits.budgets ?? this.cfg.budgets,
      maxClonesPerRound: limits.maxClonesPerRound ?? this.cfg.maxClonesPerRound,
      maxRounds: limits.maxRounds ?? this.cfg.maxRounds,
      rootMaxTokens: limits.rootMaxTokens ?? this.cfg.rootMaxTokens,
    };
    // A root that knows its limit is told this episode's.
    const prompt = rootPrompt(promptText, this.opts.encode, this.cfg.rootLimitMin !== undefined ? own.rootMaxTokens : null);
    const episode = new LiveEpisode(problem, promptText, (answer) => task.verify(problem, answer), rng, own);
    episode.root = this.openContext(episode, {
      role: 'root',
      parent: null,
      round: null,
      subtask: null,
      budget: null,
      prompt,
      parser: new RootParser(own),
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
    spec: Pick<ContextTrace, 'role' | 'parent' | 'round' | 'subtask' | 'budget'> & { prompt: number[]; parser: RootParser | CloneParser },
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
    const event = c.parser.feed(id);
    if (c.trace.role === 'root') this.onRootEvent(c, event);
    else this.onCloneEvent(c, event);
  }

  private onRootEvent(root: LiveContext, e: ParseEvent): void {
    const ep = root.episode;
    switch (e.kind) {
      case 'final':
        ep.answer = e.answer;
        root.trace.answer = e.answer;
        this.finish(root);
        ep.finished = true;
        return;
      case 'violation':
        this.violate(root, e.violation, e.detail);
        ep.finished = true;
        return;
      case 'join': {
        // A join on the root's last allowed token: it could not read the answers, so the round does not start.
        if (root.trace.generatedTokens >= ep.limits.rootMaxTokens) {
          return this.endRoot(root, 'root_over_max', `root generated ${root.trace.generatedTokens} tokens (max ${ep.limits.rootMaxTokens})`);
        }
        const round = (root.parser as RootParser).roundsDone;
        const fanned = fanOut(e.blocks, ep.problem.context);
        if ('error' in fanned) return this.endRoot(root, 'malformed_spawn', fanned.error);
        const blocks = fanned.blocks;
        if (blocks.length > ep.limits.maxClonesPerRound) {
          return this.endRoot(root, 'too_many_clones', `the round's spawns fan out to ${blocks.length} clones (max ${ep.limits.maxClonesPerRound})`);
        }
        const prompts: number[][] = [];
        for (const block of blocks) {
          const p = clonePrompt(block.subtask, ep.problem.context, this.opts.encode);
          if ('error' in p) return this.endRoot(root, 'malformed_spawn', p.error);
          if (p.tokens.length + block.budget > this.decoder.maxPositions) {
            return this.endRoot(root, 'malformed_spawn', `clone prompt (${p.tokens.length}) plus budget (${block.budget}) exceeds the context`);
          }
          prompts.push(p.tokens);
        }
        // The root waits; its <join> is fed together with the injected answers on resume.
        root.pending = [];
        ep.round = blocks.map((block, i) =>
          this.openContext(ep, {
            role: 'clone',
            parent: root.trace.id,
            round,
            subtask: decodeText(block.subtask),
            budget: block.budget,
            prompt: prompts[i],
            parser: new CloneParser(),
          }),
        );
        ep.running = new Set(ep.round);
        ep.events.push({ kind: 'spawn', round, atToken: root.trace.tokens.length - 1, clones: ep.round.map((c) => c.trace.id) });
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

  private onCloneEvent(clone: LiveContext, e: ParseEvent): void {
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
    const round = (root.parser as RootParser).roundsDone;
    const answers = ep.round.map((c) => c.trace.answer);
    const injected = joinInjection(answers, this.cfg.answerMaxChars, this.opts.encode);
    ep.events.push({ kind: 'join', round, atToken: root.trace.tokens.length, answers });
    if (root.trace.tokens.length + injected.length >= this.decoder.maxPositions) {
      this.endRoot(root, 'root_over_max', 'the joined answers do not fit in the root context');
      return;
    }
    const join = root.trace.tokens[root.trace.tokens.length - 1];
    this.append(root, injected, 'i');
    (root.parser as RootParser).resume();
    root.pending = [join, ...injected];
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
    const contexts = ep.contexts.map((c) => ({ ...c, text: decodeText(c.tokens) }));
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
      rounds: (ep.root.parser as RootParser).roundsDone,
      contexts,
      events: ep.events,
      violations: ep.violations,
      tokens: countTokens(contexts),
    };
  }
}

function decodeText(ids: readonly number[]): string {
  let s = '';
  for (const id of ids) s += VOCAB[id] ?? '<?>';
  return s;
}
