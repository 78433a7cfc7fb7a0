/**
 * A chat template (a Jinja program from a stranger's folder) parsed and rendered with bounds, so
 * that no template can hang or kill the process: every node the interpreter evaluates is one step
 * of a budget, every string and list it makes counts against a budget of produced characters and
 * items, a list costs a step an item (a loop over it runs that often), no single string or list
 * may outgrow its bound, `range()` is capped as Jinja's own sandbox caps it, and the clock is read
 * at every step. A real chat template renders in a few thousand steps; the bounds are far past
 * that. Every error names the file and the field.
 */
import { Environment, Interpreter, parse, tokenize } from '@huggingface/jinja';
import { HfFolderError } from '../io/hfFolder';

export interface ChatTemplateLimits {
  /** Characters of the template's source. */
  sourceChars: number;
  /** Nodes evaluated in one render (loop work). */
  steps: number;
  /** Characters (and list items) made in one render, all strings and lists together. */
  producedChars: number;
  /** Characters of any one string (the output included). */
  outputChars: number;
  /** Items of any one list, `range()`'s included. */
  listItems: number;
  /** Wall-clock milliseconds of one render. */
  ms: number;
}

export const CHAT_TEMPLATE_LIMITS: ChatTemplateLimits = {
  sourceChars: 256 * 1024,
  steps: 500_000,
  producedChars: 50_000_000,
  outputChars: 4_000_000,
  listItems: 100_000,
  ms: 1000,
};

/** A chat template that cannot be parsed or that broke a bound or raised while rendering. */
export class ChatTemplateError extends HfFolderError {
  constructor(message: string) {
    super(message);
    this.name = 'ChatTemplateError';
  }
}

type Program = ReturnType<typeof parse>;
type Value = ReturnType<Interpreter['evaluate']>;
type Node = Parameters<Interpreter['evaluate']>[0];

/** Why a render stopped at a bound (thrown through the interpreter, turned into a ChatTemplateError). */
class BoundBroken extends Error {}

const count = (n: number) => n.toLocaleString('en');

/** The interpreter with every evaluation metered. */
class BoundedInterpreter extends Interpreter {
  private steps = 0;
  private produced = 0;
  private readonly deadline: number;

  constructor(
    env: Environment,
    private readonly limits: ChatTemplateLimits,
  ) {
    super(env);
    this.deadline = performance.now() + limits.ms;
  }

  override evaluate(node: Node, env: Environment): Value {
    this.charge(1);
    const value = super.evaluate(node, env);
    const text = typeof value.value === 'string';
    const size = text || Array.isArray(value.value) ? (value.value as string | unknown[]).length : 0;
    const max = text ? this.limits.outputChars : this.limits.listItems;
    if (size > max) throw new BoundBroken(`makes a ${text ? 'string' : 'list'} of ${count(size)} ${text ? 'characters' : 'items'}, more than ${count(max)}`);
    // A list costs a step an item: a loop over it runs its body (or nothing) that many times.
    if (!text) this.charge(size);
    this.produced += size;
    if (this.produced > this.limits.producedChars)
      throw new BoundBroken(`makes more than ${count(this.limits.producedChars)} characters and list items in all`);
    return value;
  }

  private charge(steps: number): void {
    this.steps += steps;
    if (this.steps > this.limits.steps) throw new BoundBroken(`takes more than ${count(this.limits.steps)} steps (a loop too long or without end)`);
    if (performance.now() > this.deadline) throw new BoundBroken(`takes more than ${count(this.limits.ms)} ms to render`);
  }
}

export class ChatTemplate {
  private constructor(
    private readonly program: Program,
    /** Where the template came from, as errors name it ("tokenizer_config.json: chat_template"). */
    readonly where: string,
    private readonly limits: ChatTemplateLimits,
  ) {}

  /** The template parsed; a ChatTemplateError naming `where` when it is too long or not Jinja this engine reads. */
  static parse(source: string, where: string, limits: ChatTemplateLimits = CHAT_TEMPLATE_LIMITS): ChatTemplate {
    if (source.length > limits.sourceChars)
      throw new ChatTemplateError(`${where}: the template has ${count(source.length)} characters, more than ${count(limits.sourceChars)}`);
    try {
      return new ChatTemplate(parse(tokenize(source, { lstrip_blocks: true, trim_blocks: true })), where, limits);
    } catch (e) {
      throw new ChatTemplateError(`${where}: cannot be parsed (${message(e)})`);
    }
  }

  /** The template's text for `items` (messages, add_generation_prompt, special tokens, tools), within the bounds. */
  render(items: Record<string, unknown>): string {
    const env = new Environment();
    env.set('false', false);
    env.set('true', true);
    env.set('raise_exception', (text: unknown) => {
      throw new Error(`the template raised an exception: ${String(text)}`);
    });
    env.set('range', (start: number, stop?: number, step = 1) => boundedRange(this.limits.listItems, start, stop, step));
    for (const [key, value] of Object.entries(items)) env.set(key, value);
    try {
      const out = new BoundedInterpreter(env, this.limits).run(this.program);
      if (typeof out.value !== 'string') throw new Error(`renders ${out.type}, not text`);
      return out.value;
    } catch (e) {
      throw new ChatTemplateError(`${this.where}: ${e instanceof BoundBroken ? e.message : `cannot be rendered (${message(e)})`}`);
    }
  }
}

/** Python's range(), refusing more than `max` numbers before making any. */
function boundedRange(max: number, start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (![from, to, step].every((v) => typeof v === 'number' && Number.isInteger(v))) throw new Error('range() takes integers');
  if (step === 0) throw new Error('range() step must not be zero');
  const n = Math.max(0, Math.ceil((to - from) / step));
  if (n > max) throw new BoundBroken(`asks range() for ${count(n)} numbers, more than ${count(max)}`);
  return Array.from({ length: n }, (_, i) => from + i * step);
}

/** An engine error's words, shortened (some quote the whole template). */
function message(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
