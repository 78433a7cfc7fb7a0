/**
 * A text episode stepped token by token: the real loop (runTextEpisode) with a chooser that stops
 * before returning each token until told to go on. What the page sees at each stop: every context
 * so far (its tokens as the model's own strings, with their writers), which context is generating,
 * and the next token's most likely candidates with their probabilities at the sampling
 * temperature, the one picked among them.
 */
import { samplingChooser } from '../../core/model/decoder';
import { topKProbs } from '../../core/model/sample';
import type { Rng } from '../../core/rng';
import { type TextContext, type TextEpisode, type TextEpisodeOptions } from '../../core/rollout/textEpisode';
import type { TextModel } from '../../core/policyModel';

export interface LmStepperContext {
  role: 'root' | 'clone';
  objective: string | null;
  pieces: string[];
  writers: string;
}

export interface LmStepperState {
  contexts: LmStepperContext[];
  /** The token about to be added: its context, the candidates (most likely first) and the one picked. */
  next: { context: number; candidates: { piece: string; prob: number }[]; picked: string } | null;
  done: boolean;
}

export type StepUntil = 'token' | 'turn' | 'end';

const CANDIDATES = 5;

/** What a cancelled stepped episode ends with. */
export class StepperCancelled extends Error {
  constructor() {
    super('the stepped episode was ended');
    this.name = 'StepperCancelled';
  }
}

export class LmStepper {
  private contexts: { ctx: TextContext; shown: LmStepperContext }[] = [];
  private current = -1;
  private next: LmStepperState['next'] = null;
  private until: StepUntil = 'token';
  private turnStarted = false;
  private release: { go: () => void; cancel: (e: Error) => void } | null = null;
  private cancelled = false;
  private waiting: ((s: LmStepperState) => void) | null = null;
  private finished = false;
  readonly episode: Promise<TextEpisode>;

  constructor(model: TextModel, run: (options: Pick<TextEpisodeOptions, 'choose' | 'onTurn'>) => Promise<TextEpisode>, temperature: number, rng: Rng) {
    const V = model.config.vocabSize;
    const piece = (id: number) => model.tokenizer.tokenString(id);
    const pick = samplingChooser(V, temperature, rng);
    this.episode = run({
      onTurn: (index, ctx) => {
        this.current = index;
        this.turnStarted = true;
        const shown = { role: ctx.role, objective: ctx.objective, pieces: ctx.tokens.map(piece), writers: ctx.writers };
        this.contexts[index] = { ctx, shown };
      },
      choose: async (logits) => {
        const id = await pick(logits);
        const pause = this.until === 'token' || (this.until === 'turn' && this.turnStarted);
        this.turnStarted = false;
        if (pause) {
          this.until = 'token';
          const candidates = topKProbs(logits, 0, V, CANDIDATES, temperature > 0 ? temperature : 1).map((c) => ({ piece: piece(c.id), prob: c.prob }));
          this.next = { context: this.current, candidates, picked: piece(id) };
          if (this.cancelled) throw new StepperCancelled();
          await new Promise<void>((go, cancel) => {
            this.release = { go, cancel };
            this.wake();
          });
          this.next = null;
        }
        const shown = this.contexts[this.current]?.shown;
        if (shown) {
          shown.pieces.push(piece(id));
          shown.writers += 'g';
        }
        return id;
      },
    }).finally(() => {
      this.finished = true;
      this.wake();
    });
    // A cancelled episode ends in StepperCancelled; nobody awaits that.
    this.episode.catch(() => undefined);
  }

  /**
   * Ends a stepped episode where it stopped (its caches are freed as the loop unwinds), before the
   * weights it decodes with change or go: a new episode, a GRPO step, a reset or another model.
   * Resolves once the loop has ended.
   */
  async cancel(): Promise<void> {
    this.cancelled = true;
    const r = this.release;
    this.release = null;
    r?.cancel(new StepperCancelled());
    await this.episode.catch(() => undefined);
  }

  /** The state at the next stop (or the end). */
  stop(): Promise<LmStepperState> {
    if (this.finished || this.next !== null) return Promise.resolve(this.state());
    return this.waitForStop();
  }

  /** Goes on to the next token, the next turn's first token, or the end; the state there. */
  advance(until: StepUntil): Promise<LmStepperState> {
    this.until = until;
    const r = this.release;
    this.release = null;
    const p = this.waitForStop();
    if (r) r.go();
    else if (this.finished) this.wake();
    return p;
  }

  private state(): LmStepperState {
    // Contexts as the loop holds them now (injected tool messages appear when the root's next turn starts).
    return {
      contexts: this.contexts.map((c) => ({ ...c.shown, pieces: [...c.shown.pieces] })),
      next: this.next,
      done: this.finished,
    };
  }

  /** The next stop's state; a caller still waiting for an earlier one gets the same. */
  private waitForStop(): Promise<LmStepperState> {
    const earlier = this.waiting;
    return new Promise((resolve) => {
      this.waiting = (s) => {
        earlier?.(s);
        resolve(s);
      };
    });
  }

  private wake(): void {
    const w = this.waiting;
    this.waiting = null;
    w?.(this.state());
  }
}
