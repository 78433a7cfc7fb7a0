import { SMOOTHING_WEIGHTS } from './smoothing';

/** The smoothing weight menu of a set of curves (the curves panel, the runs comparison). */
export function SmoothingSelect({ testId, value, onChange, title }: { testId: string; value: number; onChange: (w: number) => void; title: string }) {
  return (
    <label title={title}>
      smoothing{' '}
      <select data-testid={testId} value={value} onChange={(e) => onChange(Number(e.target.value))}>
        {SMOOTHING_WEIGHTS.map((w) => (
          <option key={w} value={w}>
            {w === 0 ? '0 (raw)' : w}
          </option>
        ))}
      </select>
    </label>
  );
}
