/** The engine's log lines (newest last). */
import { usePlayground } from '../state/store';

export function LogPanel() {
  const log = usePlayground((s) => s.log);
  if (log.length === 0) return null;
  return (
    <section className="panel" aria-label="Engine log">
      <h2>Log</h2>
      <ol className="log" data-testid="engine-log">
        {log.slice(-12).map((l, i) => (
          <li key={i} className={l.level === 'info' ? 'muted' : l.level === 'warn' ? 'warn' : 'error'}>
            {l.message}
          </li>
        ))}
      </ol>
    </section>
  );
}
