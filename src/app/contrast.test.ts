import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { OUTCOME_COLOURS } from './tree/treeLayout';
import { contrastRatio, mix, parseHex, relativeLuminance } from './contrast';

/** The custom properties of the light :root block and of the dark one in styles.css. */
function palettes(): { light: Record<string, string>; dark: Record<string, string> } {
  const css = readFileSync(new URL('./styles.css', import.meta.url), 'utf8');
  const at = css.indexOf('@media (prefers-color-scheme: dark)');
  const vars = (text: string) => Object.fromEntries([...text.matchAll(/--([\w-]+):\s*(#[0-9a-fA-F]{3,6})\s*;/g)].map((m) => [m[1], m[2]]));
  return { light: vars(css.slice(0, at)), dark: vars(css.slice(at, css.indexOf('\n}\n', at))) };
}

describe('contrast (WCAG 2)', () => {
  it('computes the reference values', () => {
    expect(contrastRatio('#000', '#fff')).toBeCloseTo(21, 9);
    expect(contrastRatio('#777', '#777')).toBe(1);
    expect(relativeLuminance('#ffffff')).toBe(1);
    // #767676 on white is the well-known lightest AA grey: 4.54.
    expect(contrastRatio('#767676', '#ffffff')).toBeCloseTo(4.54, 2);
    expect(contrastRatio('#777777', '#ffffff')).toBeLessThan(4.5);
    expect(parseHex('#1d2430')).toEqual([0x1d, 0x24, 0x30]);
    expect(mix('#000000', 0.5, '#ffffff')).toEqual([128, 128, 128]);
    expect(() => parseHex('grey')).toThrow(/not a hex colour: "grey"/);
  });

  const { light, dark } = palettes();
  for (const [scheme, p] of [
    ['light', light],
    ['dark', dark],
  ] as const) {
    it(`keeps every text colour of the ${scheme} scheme at ≥ 4.5:1 on the panel and the page`, () => {
      for (const name of ['fg', 'muted', 'accent', 'error', 'warn', 'ok', 'w-p', 'w-g', 'w-i']) {
        expect(p[name], `--${name} is defined`).toMatch(/^#/);
        expect(contrastRatio(p[name], p.panel), `--${name} on --panel`).toBeGreaterThanOrEqual(4.5);
      }
      // Prompt tokens (the grey that was 3.1:1) also on the page background.
      expect(contrastRatio(p['w-p'], p.bg)).toBeGreaterThanOrEqual(4.5);
      // Tinted backgrounds: injected tokens (12% of their colour), gated badges (15% of --muted), a pressed toggle.
      expect(contrastRatio(p['w-i'], mix(p['w-i'], 0.12, p.panel))).toBeGreaterThanOrEqual(4.5);
      expect(contrastRatio(p.muted, mix(p.muted, 0.15, p.panel))).toBeGreaterThanOrEqual(4.5);
      expect(contrastRatio(p['on-accent'], p.accent)).toBeGreaterThanOrEqual(4.5);
    });
  }

  it('gives the tree badges (white text on the outcome colour) ≥ 4.5:1', () => {
    for (const [outcome, colour] of Object.entries(OUTCOME_COLOURS)) expect(contrastRatio('#ffffff', colour), outcome).toBeGreaterThanOrEqual(4.5);
  });
});
