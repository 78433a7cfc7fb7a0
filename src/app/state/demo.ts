/**
 * The first visit: a page opened with no link and nothing saved opens on a demo that a 2-core
 * machine on wasm turns into a visible result within about three minutes of pressing Train
 * (two-hop multihop lookups over four chunks of five, where the two-task warm start fans out to
 * clones but carries the wrong key; GRPO at lr 1e-4 fixes that within about a dozen steps; tuned on
 * the monitor split, docs/DECISIONS.md, "The first visit"). Any other link, or a saved session,
 * opens as before.
 */
import { type RunConfig, configFromHash } from '../../core/runConfig';

/** The demo as a link (the hash of the first visit); every other field keeps the page's default. */
export const DEMO_HASH = 'task=multihop&taskOptions=%7B%22chunks%22%3A4%2C%22perChunk%22%3A5%2C%22filler%22%3A24%7D&lr=0.0001&evalEvery=4&evalN=64';

export const DEMO_NOTE =
  'Demo: two-hop lookups over four chunks of five assignments among filler, too long for one context: only a team can read them. The warm start (taught six chunks of three) sends each hop to four clones, one per chunk, but often carries the wrong key onward: about one answer in five is right. Press Train and watch the held-out accuracy: within about three minutes on two cores it rises outside its noise. Change anything in Config to leave the demo.';

/** The demo's config on this machine's defaults. */
export function demoConfig(defaults: Partial<RunConfig>): RunConfig {
  return configFromHash(`#${DEMO_HASH}`, defaults).config;
}

/** The page opens on the demo: no link, nothing saved. */
export function opensOnDemo(hash: string, saved: boolean): boolean {
  return !saved && hash.replace(/^#/, '') === '';
}

/** The config is the demo's (any field changed leaves it). */
export function isDemo(config: RunConfig): boolean {
  const demo = configFromHash(`#${DEMO_HASH}`, {}).config;
  const { workers: _w, gradWorkers: _g, backend: _b, ...mine } = config;
  const { workers: _dw, gradWorkers: _dg, backend: _db, ...theirs } = demo;
  return JSON.stringify(mine) === JSON.stringify(theirs);
}
