/**
 * The modules of src/ import one way: no circle, type imports included (a circle of types still
 * makes two places one). Relative imports only; packages cannot import us back.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(__dirname, '..', 'src');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return /\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

function resolveImport(from: string, spec: string): string | null {
  const base = resolve(dirname(from), spec);
  for (const candidate of [base, `${base}.ts`, `${base}.tsx`, join(base, 'index.ts'), join(base, 'index.tsx')]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return null;
}

/** Each module's relative imports (static `import`/`export … from`, and `import('…')` types). */
function importGraph(files: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const specs = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'";]*?from\s*'(\.[^']+)'|import\(\s*'(\.[^']+)'\s*\)/g)].map((m) => m[1] ?? m[2]);
    graph.set(
      file,
      specs.map((s) => resolveImport(file, s.replace(/\?.*$/, ''))).filter((p): p is string => p !== null && !/\.worker\.tsx?$/.test(p) && !p.includes('?')),
    );
  }
  return graph;
}

/** The circles of a graph, each as the path that closes it (Tarjan's strongly connected components of size > 1, or a self-import). */
function circles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.map((f) => relative(SRC, f)).sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

describe('imports', () => {
  it('finds a circle where there is one', () => {
    const g = new Map([
      ['/a', ['/b']],
      ['/b', ['/c']],
      ['/c', ['/a']],
      ['/d', ['/a']],
    ]);
    expect(circles(g).map((c) => c.length)).toEqual([3]);
  });

  it('go one way across src/', () => {
    const files = sources(SRC);
    expect(files.length).toBeGreaterThan(200);
    expect(circles(importGraph(files))).toEqual([]);
  });
});
