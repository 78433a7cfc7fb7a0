/**
 * docs/GUIDE.md maps the paper onto the code: every file it names exists, and every identifier it
 * names in backticks is declared somewhere in src/ (a function, class, type, constant, field or
 * method), so a rename that leaves the guide behind fails here.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const guide = readFileSync('docs/GUIDE.md', 'utf8');
const spans = [...guide.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]);

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? sources(p) : /\.tsx?$/.test(f) && !/\.test\.tsx?$/.test(f) ? [p] : [];
  });
}
const code = sources('src')
  .map((f) => readFileSync(f, 'utf8'))
  .join('\n');

/** Declared: a function, class, type, constant, enum; a field, method or property (name: / name( / name?:); or a quoted key. */
const declared = (name: string) =>
  new RegExp(`\\b(function\\*?|class|interface|type|const|let|enum)\\s+${name}\\b|(^|[\\s{,.])${name}\\??\\s*[:(=]|'${name}'`, 'm').test(code);

describe('docs/GUIDE.md', () => {
  it('names files that exist', () => {
    const paths = spans.flatMap((s) => [...s.matchAll(/\b((?:src|test|e2e|bench|docs|public)\/[\w./-]+)/g)].map((m) => m[1].replace(/[.,]$/, '')));
    expect(paths.length).toBeGreaterThan(20);
    expect(paths.filter((p) => !existsSync(p))).toEqual([]);
  });

  it('names identifiers that the code declares', () => {
    const names = [...new Set(spans.flatMap((s) => s.split(/[\s,()]+/)).filter((w) => /^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$/.test(w)))].flatMap((w) => w.split('.'));
    const idents = names.filter((w) => /[a-z][A-Z]|^[A-Z][a-z]+[A-Z]|^[A-Z_]{4,}$/.test(w));
    expect(idents.length).toBeGreaterThan(40);
    expect(idents.filter((w) => !declared(w))).toEqual([]);
  });
});
