/** JSON Lines: each non-blank line one JSON value, with its 1-based line number (blank lines still count). */
export function jsonLines(text: string, notJson: (line: number, message: string) => Error): { line: number; value: unknown }[] {
  const out: { line: number; value: unknown }[] = [];
  text.split('\n').forEach((raw, i) => {
    if (raw.trim() === '') return;
    try {
      out.push({ line: i + 1, value: JSON.parse(raw) as unknown });
    } catch (e) {
      throw notJson(i + 1, `not valid JSON (${(e as Error).message})`);
    }
  });
  return out;
}

/** The first non-blank line of a JSON Lines text as a JSON object (a byte-order mark dropped), or null when it is not one. */
export function firstJsonObject(text: string): Record<string, unknown> | null {
  const first = text
    .replace(/^\uFEFF/, '')
    .split('\n')
    .find((l) => l.trim() !== '');
  if (first === undefined) return null;
  try {
    const row = JSON.parse(first) as unknown;
    return typeof row === 'object' && row !== null && !Array.isArray(row) ? (row as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
