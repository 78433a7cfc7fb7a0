/**
 * Local times for the page's notes, written by d3's time formatter (its locale is plain data).
 * Not toLocaleString: its first call loads the locale's ICU data on the main thread, measured at
 * 130 ms (a long task in the middle of training, the first time "saved in this browser at …" is
 * drawn; e2e/training.spec.ts).
 */
import { timeFormat } from 'd3';

const time = timeFormat('%H:%M:%S');
const dateTime = timeFormat('%Y-%m-%d %H:%M:%S');

/** "14:05:09", in the browser's time zone. */
export const clockTime = (at: Date | string | number): string => time(new Date(at));

/** "2026-12-02 14:05:09", in the browser's time zone. */
export const clockDateTime = (at: Date | string | number): string => dateTime(new Date(at));
