/**
 * WCAG 2 contrast of two sRGB colours, for choosing text colours (AA: at least 4.5:1 for text
 * of normal size). contrast.test.ts checks the page's palette in styles.css with it.
 */

export type Rgb = [number, number, number];

/** "#rgb" or "#rrggbb" → [r, g, b] in 0…255; throws naming the text otherwise. */
export function parseHex(hex: string): Rgb {
  const m = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(hex.trim());
  if (!m) throw new Error(`not a hex colour: ${JSON.stringify(hex)} (use #rgb or #rrggbb)`);
  const h = m[1].length === 3 ? [...m[1]].map((c) => c + c).join('') : m[1];
  return [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16)) as Rgb;
}

/** Relative luminance (WCAG 2.x): linearised sRGB channels weighted 0.2126, 0.7152, 0.0722. */
export function relativeLuminance(c: Rgb | string): number {
  const [r, g, b] = (typeof c === 'string' ? parseHex(c) : c).map((v) => {
    const s = v / 255;
    return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** (L_lighter + 0.05) / (L_darker + 0.05): 1 for equal colours, 21 for black on white. */
export function contrastRatio(a: Rgb | string, b: Rgb | string): number {
  const [la, lb] = [relativeLuminance(a), relativeLuminance(b)];
  return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
}

/** `color-mix(in srgb, a t, b)`: t of a over b (a tinted background). */
export function mix(a: Rgb | string, t: number, b: Rgb | string): Rgb {
  const [x, y] = [typeof a === 'string' ? parseHex(a) : a, typeof b === 'string' ? parseHex(b) : b];
  return x.map((v, i) => Math.round(v * t + y[i] * (1 - t))) as Rgb;
}
