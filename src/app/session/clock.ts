/**
 * Local times for the page's notes, from Date's own fields. Not toLocaleString: its first call
 * loads the locale's ICU data on the main thread, measured at 130 ms (a long task in the middle
 * of training, the first time "saved in this browser at …" is drawn; e2e/training.spec.ts).
 */
const two = (n: number) => String(n).padStart(2, '0');

/** "14:05:09", in the browser's time zone. */
export function clockTime(at: Date | string | number): string {
  const d = new Date(at);
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/** "2026-12-02 14:05:09", in the browser's time zone. */
export function clockDateTime(at: Date | string | number): string {
  const d = new Date(at);
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${clockTime(d)}`;
}
