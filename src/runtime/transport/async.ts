/** Small async helpers of the runtime. */

/** Runs async jobs one after another (the engine's model-changing operations). */
export class Serial {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(job: () => Promise<T>): Promise<T> {
    const result = this.tail.then(job);
    this.tail = result.catch(() => undefined);
    return result;
  }
}

/** Lets queued messages (e.g. 'pause') in between the steps of a loop. */
export function yieldToEvents(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * A one-shot alarm to race work against: `fire` rejects `promise`, which makes any
 * Promise.race over it reject (a lost GPU device can leave a readback pending forever).
 */
export interface Alarm {
  promise: Promise<never>;
  fire(error: Error): void;
  fired: Error | null;
}

export function alarm(): Alarm {
  let reject: (e: Error) => void = () => {};
  const promise = new Promise<never>((_, r) => {
    reject = r;
  });
  promise.catch(() => {}); // firing with nobody racing is not an unhandled rejection
  const a: Alarm = {
    promise,
    fired: null,
    fire(error) {
      if (a.fired) return;
      a.fired = error;
      reject(error);
    },
  };
  return a;
}
