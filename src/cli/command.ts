import { type CommandLine, type FlagSpecs, type ParsedFlags, describeFlags, parseCommandLine } from './args';

export interface Command {
  summary: string;
  usage(): string;
  run(argv: string[]): Promise<void>;
}

/** A command from its flag table and a body that receives parsed flags. */
export function defineCommand<const S extends FlagSpecs>(name: string, summary: string, flags: S, body: (f: ParsedFlags<S>) => Promise<void>): Command {
  return {
    summary,
    usage: () => `usage: npm run cli -- ${name} [flags]\n${summary}\n\nflags:\n${describeFlags(flags)}`,
    run: (argv) => body(parseCommandLine(argv, flags, null).flags),
  };
}

/**
 * A run command (`train`, `sft`): its own flags plus every field of the run-config table that
 * the command sets, validated into one RunConfig before the body starts.
 */
export function defineRunCommand<const S extends FlagSpecs>(
  name: string,
  summary: string,
  flags: S,
  body: (line: CommandLine<S> & { config: NonNullable<CommandLine<S>['config']>; argv: readonly string[] }) => Promise<void>,
  /** Whose run-config fields the command takes (export-verl takes train's). */
  surface: 'train' | 'sft' = name === 'sft' ? 'sft' : 'train',
): Command {
  return {
    summary,
    usage: () => `usage: npm run cli -- ${name} [flags]\n${summary}\n\nflags:\n${describeFlags(flags, surface)}`,
    run: (argv) => {
      const line = parseCommandLine(argv, flags, surface);
      return body({ flags: line.flags, config: line.config!, given: line.given, argv: [name, ...argv] });
    },
  };
}
