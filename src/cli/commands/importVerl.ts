import { readFile, readdir, rename, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { defineCommand } from '../command';
import { UsageError } from '../args';
import { tracesToJsonl } from '../../core/io/traces';
import { rowsFromTraces } from '../../core/eval/traceRows';
import { parseVerlFiles, stepFileOrder, verlRecordsToTraces } from '../../core/verl/readback';

/** verl agent-loop rollout records → this project's traces (docs/FORMATS.md, "verl rollout records"). */
export const importVerl = defineCommand(
  'import-verl',
  "Convert a verl run's rollout records (root and clone samples, JSONL) into traces.jsonl: the page and compare then show it as delegation trees and curves.",
  {
    in: {
      type: 'string',
      required: true,
      help: "rollout records, one JSON object per line: selfcest_dump.py's folder of <step>.jsonl files (trainer.rollout_data_dir), or one such file",
    },
    out: { type: 'string', required: true, help: 'traces file to write (.jsonl)' },
    task: { type: 'string', help: 'task name for records without data_source (default: verl)' },
  },
  async (f) => {
    if (!f.out.endsWith('.jsonl')) throw new UsageError(`--out must name a .jsonl file (got ${f.out})`);
    if (resolve(f.out) === resolve(f.in)) throw new UsageError('--out must not be --in (the records would be overwritten)');
    let files: { name: string; text: string }[];
    try {
      if ((await stat(f.in)).isDirectory()) {
        const names = (await readdir(f.in)).filter((n) => n.endsWith('.jsonl')).sort(stepFileOrder);
        if (names.length === 0) throw new UsageError(`--in ${f.in} holds no .jsonl file (selfcest_dump.py writes <step>.jsonl there)`);
        files = await Promise.all(names.map(async (n) => ({ name: n, text: await readFile(join(f.in, n), 'utf8') })));
      } else files = [{ name: f.in, text: await readFile(f.in, 'utf8') }];
    } catch (e) {
      if (e instanceof UsageError) throw e;
      throw new UsageError(`--in ${f.in} cannot be read: ${(e as Error).message}`);
    }
    const traces = verlRecordsToTraces(parseVerlFiles(files), f.task !== undefined ? { task: f.task } : {});
    if (traces.length === 0) throw new UsageError(`--in ${f.in} holds no root record (a record with parent_request_id null)`);
    // Written under a temporary name and renamed: an interrupted run never leaves half a file.
    const tmp = `${f.out}.tmp-${process.pid}`;
    await writeFile(tmp, tracesToJsonl(traces));
    await rename(tmp, f.out);
    const clones = traces.reduce((n, t) => n + t.contexts.length - 1, 0);
    const withReward = traces.filter((t) => t.reward || t.sourceReward).length;
    const withParts = traces.filter((t) => t.reward).length;
    console.log(
      `wrote ${f.out}: ${traces.length} episodes from ${files.length} file${files.length === 1 ? '' : 's'}, ${clones} clones, ${withReward} with the source's reward (${withParts} with all its parts)`,
    );
    if (withReward < traces.length) {
      console.log(
        `warning: ${traces.length - withReward} episodes carry no reward: the trees show them, but the Runs panel and compare need a reward in every step's episodes (log "reward" with the root samples)`,
      );
    } else {
      const rows = rowsFromTraces(traces);
      console.log(`steps ${rows[0].step}–${rows[rows.length - 1].step}; compare with: npm run cli -- compare --runs verl=${f.out}`);
    }
  },
);
