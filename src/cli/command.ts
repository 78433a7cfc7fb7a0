import { type FlagSpecs, type ParsedFlags, describeFlags, parseFlags } from './args';

export interface Command {
  summary: string;
  usage(): string;
  run(argv: string[]): Promise<void>;
}

/** A command from its flag table and a body that receives parsed flags. */
export function defineCommand<S extends FlagSpecs>(
  name: string,
  summary: string,
  flags: S,
  body: (f: ParsedFlags<S>) => Promise<void>,
): Command {
  return {
    summary,
    usage: () => `usage: npm run cli -- ${name} [flags]\n${summary}\n\nflags:\n${describeFlags(flags)}`,
    run: (argv) => body(parseFlags(argv, flags)),
  };
}

