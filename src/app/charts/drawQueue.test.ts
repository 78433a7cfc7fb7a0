import { describe, expect, it } from 'vitest';
import { queueDraw } from './drawQueue';

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('the chart draw queue', () => {
  it('draws one chart per task, the latest draw of each, and skips cancelled ones', async () => {
    const a = {},
      b = {},
      c = {};
    const drawn: string[] = [];
    queueDraw(a, () => drawn.push('a1'));
    queueDraw(b, () => drawn.push('b'));
    queueDraw(a, () => drawn.push('a2'));
    const cancel = queueDraw(c, () => drawn.push('c'));
    cancel();
    expect(drawn).toEqual([]);
    await tick();
    expect(drawn).toEqual(['b']);
    await tick();
    expect(drawn).toEqual(['b', 'a2']);
    await tick();
    await tick();
    expect(drawn).toEqual(['b', 'a2']);
  });
});
