/** The saved session under the checkpoint: restored (with Start fresh), unreadable (kept, with Delete), and the last save. */
import { clockDateTime, clockTime } from '../session/clock';
import { deleteKeptSessions, startFresh } from '../session/sessionActions';
import { loopActive, usePlayground } from '../state/store';

const timeText = (iso: string | null) => (iso === null ? 'an unknown time' : clockDateTime(iso));

export function SessionNote() {
  const session = usePlayground((s) => s.session);
  const saved = usePlayground((s) => s.saved);
  const busy = usePlayground((s) => s.pending !== null || loopActive(s.engineState));
  return (
    <>
      {session?.kind === 'restored' && (
        <p className="muted" data-testid="session-restored" data-step={session.step} data-policy-version={session.policyVersion}>
          restored session from {timeText(session.savedAt)}, GRPO step {session.step} (policy v{session.policyVersion}){' '}
          <button
            type="button"
            data-testid="start-fresh"
            disabled={busy}
            onClick={() => void startFresh()}
            title="Drop the saved session and load the config's start checkpoint"
          >
            Start fresh
          </button>
        </p>
      )}
      {session?.kind === 'unreadable' && (
        <p className="error" role="alert" data-testid="session-unreadable">
          The saved session from {timeText(session.savedAt)} was not restored; the page started fresh. {session.message}. It is kept in this browser's storage
          until you delete it.{' '}
          <button type="button" data-testid="delete-saved-session" onClick={() => void deleteKeptSessions()}>
            Delete it
          </button>
        </p>
      )}
      {saved !== null && 'error' in saved && (
        <p className="warn" data-testid="session-save-error">
          Not saved in the browser: {saved.error}
        </p>
      )}
      {saved !== null && !('error' in saved) && (
        <p className="muted small" data-testid="session-saved" data-step={saved.step} data-policy-version={saved.policyVersion} data-at={saved.at}>
          saved in this browser at {clockTime(saved.at)} (GRPO step {saved.step}, policy v{saved.policyVersion})
        </p>
      )}
    </>
  );
}
