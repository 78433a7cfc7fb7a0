/**
 * The Python that reference checks run under: $SELFCEST_PYTHON (the venv .ci/run makes from the
 * machine's package index: numpy, torch, pyarrow, datasets, tokenizers, transformers), else
 * python3. A check asks for the modules it needs; without them it is skipped with a message
 * naming what is missing, unless SELFCEST_REQUIRE_PYTHON=1 (CI), where that is a failure.
 */
import { spawnSync } from 'node:child_process';

const CANDIDATES = [process.env.SELFCEST_PYTHON, 'python3'].filter((p): p is string => p !== undefined && p !== '');

export interface PythonFound {
  python: string | null;
  /** Why there is none: the modules missing from each candidate. */
  why: string;
}

const cache = new Map<string, PythonFound>();

/** A Python that imports every module of `modules`, or null and why not. */
export function pythonWith(...modules: string[]): PythonFound {
  const key = modules.join(',');
  const hit = cache.get(key);
  if (hit) return hit;
  const misses: string[] = [];
  let found: PythonFound | null = null;
  for (const python of CANDIDATES) {
    const probe = spawnSync(
      python,
      ['-c', `import importlib.util, sys\nmissing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]\nprint(",".join(missing))`, ...modules],
      { encoding: 'utf8' },
    );
    if (probe.error !== undefined || probe.status !== 0) {
      misses.push(`${python}: not runnable`);
      continue;
    }
    const missing = probe.stdout.trim();
    if (missing === '') {
      found = { python, why: '' };
      break;
    }
    misses.push(`${python} lacks ${missing}`);
  }
  found ??= { python: null, why: `${misses.join('; ')} (bash .ci/run makes a venv with them from the machine's package index; SELFCEST_PYTHON names one)` };
  if (found.python === null && process.env.SELFCEST_REQUIRE_PYTHON === '1')
    throw new Error(`SELFCEST_REQUIRE_PYTHON=1 but no Python with ${modules.join(', ')}: ${found.why}`);
  cache.set(key, found);
  return found;
}
