import { describe, expect, it } from 'vitest';
import { clockDateTime, clockTime } from './clock';

describe('clock', () => {
  it('writes local times with two-digit fields', () => {
    const d = new Date(2026, 0, 5, 7, 3, 9);
    expect(clockTime(d)).toBe('07:03:09');
    expect(clockDateTime(d)).toBe('2026-01-05 07:03:09');
    expect(clockDateTime(d.toISOString())).toBe('2026-01-05 07:03:09');
    expect(clockTime(new Date(2026, 11, 31, 23, 59, 58).getTime())).toBe('23:59:58');
  });
});
