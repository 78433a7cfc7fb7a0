/** Task options as they come from outside (JSON from a file, the CLI, the page). */

/** The fields of raw options; undefined and null give none (every field its default). */
export function optionFields(task: string, raw: unknown): Record<string, unknown> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new Error(`${task}: options must be an object of fields (got ${JSON.stringify(raw)})`);
  return raw as Record<string, unknown>;
}
