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
