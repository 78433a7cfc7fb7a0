/**
 * The token-by-token stepper: one new episode on a frozen snapshot of the current weights,
 * advanced one batched decode step at a time (every live context of the episode gets one
 * token per step, like in training rollouts).
 *
 * With the same seed and settings it is the episode `npm run cli -- rollout --seed N` prints.
 * Each live context shows the top-k of the distribution its latest token was drawn from.
 */
import { topKProbs } from '../../core/model/sample';
import type { PolicyModel } from '../../core/policyModel';
import { Rng } from '../../core/rng';
import type { RolloutConfig } from '../../core/rollout/config';
import { type ContextDecoder, RolloutScheduler } from '../../core/rollout/scheduler';
import { evaluateExact, parseSum } from '../../core/tasks/arithmetic';
import type { AnyTask, AnyTaskOptions, Problem } from '../../core/tasks';
import { yieldToEvents } from '../transport/async';
import type { StepperState } from './messages';

export const STEPPER_TOP_K = 5;

export interface StepperSpec {
  task: AnyTask;
  /** The task's options, validated (the run's; a generated problem draws from them). */
  options: AnyTaskOptions;
  seed: number;
  /** Own prompt text instead of a generated problem. */
  prompt?: string;
  rollout: RolloutConfig;
  policyVersion: number;
  encode: (text: string) => number[];
}

/** A frozen copy of the model's weights as they are now, for one episode; `dispose` frees the copy. */
export interface ModelSnapshot {
  model: PolicyModel;
  dispose(): void;
}

export class Stepper {
  private readonly decoder: ContextDecoder & { dispose(): void };
  private readonly scheduler: RolloutScheduler;
  private readonly topK = new Map<number, { token: string; prob: number }[]>();
  private disposed = false;

  /** `snapshot`: the model's weights frozen for this episode (training may go on while the user steps); the stepper owns it. */
  constructor(
    private readonly snapshot: ModelSnapshot,
    spec: StepperSpec,
  ) {
    const rng = new Rng(spec.seed);
    const problem = spec.prompt === undefined ? spec.task.generate(rng, spec.options, `seed${spec.seed}`) : problemFromPrompt(spec.task, spec.prompt);
    const { model } = snapshot;
    this.decoder = model.decoder(8);
    const protocol = model.protocol(spec.rollout);
    // A token's text: its own piece where the model's tokens are subwords, else the token's decoding.
    const tokenText = (id: number) => protocol.pieces?.([id])[0] ?? protocol.decode([id]);
    const banned = protocol.banned(spec.rollout.allowSpawn);
    const temperature = spec.rollout.greedy ? 1 : spec.rollout.temperature;
    this.scheduler = new RolloutScheduler(this.decoder, spec.rollout, {
      policyVersion: spec.policyVersion,
      encode: spec.encode,
      protocol,
      onToken: (e) => {
        const V = this.decoder.vocabSize;
        // The distribution the token was drawn from: without spawning, the protocol's spawn tokens were banned.
        const row = e.logits.slice(e.offset, e.offset + V);
        for (const id of banned) row[id] = -Infinity;
        const top = topKProbs(row, 0, V, STEPPER_TOP_K, temperature);
        this.topK.set(
          e.context,
          top.map(({ id, prob }) => ({ token: tokenText(id) || `#${id}`, prob })),
        );
      },
    });
    try {
      this.scheduler.addEpisode(spec.task, problem, rng.fork());
    } catch (e) {
      this.dispose();
      throw e;
    }
  }

  /**
   * 'token': one decode step. 'spawn': until the episode's next spawn or join event, or its end.
   * 'end': until the episode is done.
   */
  async advance(until: 'token' | 'spawn' | 'end'): Promise<StepperState> {
    if (this.disposed) throw new Error('stepper: the episode is over; start a new one');
    const events = () => this.scheduler.results()[0].events.length;
    const before = events();
    let steps = 0;
    do {
      await this.scheduler.step();
      // A long advance must not hold up other requests (e.g. 'pause') for its whole length.
      if (++steps % 16 === 0) await yieldToEvents();
    } while (!this.scheduler.done && (until === 'end' || (until === 'spawn' && events() === before)));
    return this.state();
  }

  state(): StepperState {
    const trace = this.scheduler.results()[0];
    const live = this.scheduler.liveContexts().map((c) => ({ context: c.context, role: c.role, waiting: c.waiting, topK: this.topK.get(c.context) ?? [] }));
    const done = this.scheduler.done;
    if (done) this.dispose();
    return { trace, live, done };
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.decoder.dispose();
    this.snapshot.dispose();
  }
}

/** A problem from the user's own prompt (arithmetic: the truth is the expression's exact value). */
export function problemFromPrompt(task: AnyTask, prompt: string): Problem {
  if (task.name !== 'arithmetic') throw new Error(`stepper: own prompts are supported for arithmetic only (task ${task.name})`);
  let truth: bigint;
  try {
    truth = evaluateExact(parseSum(prompt));
  } catch (e) {
    throw new Error(`stepper: prompt is not an arithmetic expression: ${(e as Error).message}`);
  }
  return { task: task.name, id: 'custom', prompt, truth: String(truth), meta: {} };
}
