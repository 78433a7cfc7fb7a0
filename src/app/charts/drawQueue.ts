/**
 * Chart redraws one per task. A training step updates every chart at once; drawn in one React
 * commit they made a main-thread task of 60–100 ms on this machine (d3 rebuilding ten SVGs), and
 * twice that under load. Queued here, each chart draws in a task of its own and the page answers
 * input between them. A chart queued again before its turn draws once, with its latest data.
 */
type Draw = () => void;

const queue = new Map<object, Draw>();
let scheduled = false;

function drainOne(): void {
  scheduled = false;
  const first = queue.entries().next();
  if (first.done) return;
  const [key, draw] = first.value;
  queue.delete(key);
  if (queue.size > 0) schedule();
  draw();
}

function schedule(): void {
  if (scheduled) return;
  scheduled = true;
  setTimeout(drainOne, 0);
}

/** Queues `draw` for `key` (replacing one still waiting); returns a cancel for the effect's cleanup. */
export function queueDraw(key: object, draw: Draw): () => void {
  queue.delete(key); // to the back: a chart that keeps changing does not hold the others up
  queue.set(key, draw);
  schedule();
  return () => {
    if (queue.get(key) === draw) queue.delete(key);
  };
}
