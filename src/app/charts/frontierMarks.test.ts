import { describe, expect, it } from 'vitest';
import type { FrontierPoint } from '../../core/eval/frontier';
import { markerOf, nSummary, placePoints } from './frontierMarks';

const pt = (method: FrontierPoint['method'], extra: Partial<FrontierPoint> = {}): FrontierPoint => ({
  method,
  limit: 48,
  n: 200,
  accuracy: 0.5,
  meanTokens: 40,
  meanCriticalPathTokens: 30,
  interval: [0.45, 0.55],
  ...extra,
});

describe('frontier marks', () => {
  it('gives delegate a disc and mono a ring around it, so one on the other shows both', () => {
    const d = markerOf('delegate');
    const m = markerOf('mono');
    expect(d.filled).toBe(true);
    expect(m.filled).toBe(false);
    expect(m.r).toBeGreaterThan(d.r + m.strokeWidth / 2);
    expect(markerOf('sc4').dash).not.toBeNull();
  });

  it('leaves separate points where they are', () => {
    const placed = placePoints(
      [pt('delegate'), pt('mono')],
      [
        { x: 100, y: 50 },
        { x: 120, y: 50 },
      ],
    );
    expect(placed).toEqual([
      { x: 100, y: 50, spread: false },
      { x: 120, y: 50, spread: false },
    ]);
  });

  it('spreads coincident points on a circle of the given radius, in method order, the same on every call', () => {
    // Delegate equals mono after 10 steps: same place; input order mono first.
    const points = [pt('mono', { step: 10 }), pt('delegate', { step: 10 }), pt('sc2')];
    const xy = [
      { x: 200, y: 80 },
      { x: 201, y: 80 },
      { x: 300, y: 20 },
    ];
    const placed = placePoints(points, xy, 3, 5);
    expect(placed[2]).toEqual({ x: 300, y: 20, spread: false });
    // Delegate first (at the top), mono opposite (two members: 180° apart), around the mean place.
    expect(placed[1].x).toBeCloseTo(200.5, 9);
    expect(placed[1].y).toBeCloseTo(75, 9);
    expect(placed[0].x).toBeCloseTo(200.5, 9);
    expect(placed[0].y).toBeCloseTo(85, 9);
    expect(placed[0].spread && placed[1].spread).toBe(true);
    expect(Math.hypot(placed[0].x - placed[1].x, placed[0].y - placed[1].y)).toBeCloseTo(10, 9);
    expect(placePoints(points, xy, 3, 5)).toEqual(placed);
  });

  it('spreads three coincident evaluations evenly and keeps them apart', () => {
    const points = [pt('delegate', { step: 1 }), pt('delegate', { step: 2 }), pt('delegate', { step: 3 })];
    const placed = placePoints(
      points,
      points.map(() => ({ x: 10, y: 10 })),
      3,
      5,
    );
    for (let i = 0; i < 3; i++)
      for (let j = i + 1; j < 3; j++) expect(Math.hypot(placed[i].x - placed[j].x, placed[i].y - placed[j].y)).toBeCloseTo(5 * Math.sqrt(3), 9);
  });

  it('states the n of the points drawn, and the mix after an Evaluate with another n', () => {
    expect(nSummary([])).toBe('no points');
    expect(nSummary([pt('delegate'), pt('mono')])).toBe('n = 200');
    expect(nSummary([pt('delegate', { n: 2 }), pt('mono', { n: 2 }), pt('delegate')])).toBe('n = 2 (2 points), 200 (1 point)');
  });
});
