/**
 * The first visit: a page opened with no link and nothing saved opens on a demo that a 2-core
 * machine on wasm turns into a visible result within about three minutes of pressing Train
 * (two-hop multihop lookups over four chunks of five, where the two-task warm start fans out to
 * clones but carries the wrong key; GRPO at lr 1e-4, reached over 3 steps, fixes that within about
 * four to six steps; chosen on the monitor split, docs/DECISIONS.md, "The first visit"). The
 * warm-up is what keeps the curve from opening with a fall: Adam's first updates move every weight
 * by about the full learning rate whatever its gradient, and at 1e-4 that first move undid the warm
 * start. Any other link, or a saved session, opens as before.
 */
import { type RunConfig, configFromHash } from '../../core/runConfig';

/** The demo as a link (the hash of the first visit); every other field keeps the page's default. */
export const DEMO_HASH = 'task=multihop&taskOptions=%7B%22chunks%22%3A4%2C%22perChunk%22%3A5%2C%22filler%22%3A24%7D&lr=0.0001&lrWarmup=3&evalEvery=4&evalN=64';

export const DEMO_NOTE =
  'Demo: two-hop lookups over four chunks of five assignments among filler, too long for one context: only a team can read them. The warm start (taught six chunks of three) sends each hop to four clones, one per chunk, but often carries the wrong key onward: about one answer in five is right. Press Train and watch the held-out accuracy: within three minutes on two cores, even slow or busy ones, it rises outside its noise. Change anything in Config to leave the demo.';

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
