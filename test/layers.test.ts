/**
 * The layers' imports point one way (docs/GUIDE.md): src/core imports nothing of the other layers,
 * src/runtime only core, src/app and src/cli core and runtime, never each other. Every import and
 * export-from of every source file is read and resolved against its folder. Tests beside the code
 * are not layers' code: they may start a backend or a worker from any layer.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
const LAYERS = ['core', 'runtime', 'app', 'cli'] as const;
type Layer = (typeof LAYERS)[number];
/** What each layer may import from besides itself. */
const ALLOWED: Record<Layer, readonly Layer[]> = { core: [], runtime: ['core'], app: ['core', 'runtime'], cli: ['core', 'runtime'] };

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.(ts|tsx|mts)$/.test(name) && !/\.test\.tsx?$/.test(name) ? [path] : [];
  });
}

const layerOf = (path: string): Layer | null => {
  const top = relative(SRC, path).split(/[\\/]/)[0];
  return (LAYERS as readonly string[]).includes(top) ? (top as Layer) : null;
};

/** Relative specifiers of a file's imports, exports-from and dynamic imports. */
function specifiers(source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(/(?:import|export)\s[^'"]*?from\s*['"](\.[^'"]+)['"]|import\s*\(\s*['"](\.[^'"]+)['"]\s*\)|import\s+['"](\.[^'"]+)['"]/g)) {
    out.push((m[1] ?? m[2] ?? m[3]) as string);
  }
  return out;
}

describe('the layers of src/', () => {
  it('import one way: core ← runtime ← app and cli', () => {
    const wrong: string[] = [];
    let read = 0;
    let seen = 0;
    for (const file of files(SRC)) {
      const from = layerOf(file);
      if (from === null) continue;
      read++;
      for (const spec of specifiers(readFileSync(file, 'utf8'))) {
        seen++;
        const target = resolve(dirname(file), spec);
        const to = layerOf(target);
        // Outside src/ (package.json, test helpers) is not a layer; the file's own layer always may.
        if (to === null || to === from) continue;
        if (!ALLOWED[from].includes(to)) wrong.push(`${relative(SRC, file)} imports ${spec} (${from} → ${to})`);
      }
    }
    expect(read).toBeGreaterThan(200);
    // The reading finds the imports (a pattern that missed them would pass anything).
    expect(seen).toBeGreaterThan(1000);
    expect(wrong).toEqual([]);
  });
});
