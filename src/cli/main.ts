/**
 * `npm run cli -- <command> [flags]`: the playground's core, headless.
 * Usage errors and a model folder's bad parts exit with code 2; other failures with 1.
 */
import { UsageError } from './args';
import { COMMANDS } from './commands';
import { HfFolderError } from '../core/io/hfFolder';

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const cmd = name ? COMMANDS[name] : undefined;
  if (!cmd) {
    const list = Object.entries(COMMANDS)
      .map(([n, c]) => `  ${n.padEnd(10)} ${c.summary}`)
      .join('\n');
    const msg = `usage: npm run cli -- <command> [flags]\n\ncommands:\n${list}\n\n'npm run cli -- <command> --help' lists a command's flags.`;
    if (name === undefined || name === '--help' || name === 'help') {
      console.log(msg);
      return name === undefined ? 2 : 0;
    }
    console.error(`unknown command ${JSON.stringify(name)}\n\n${msg}`);
    return 2;
  }
  if (rest.includes('--help')) {
    console.log(cmd.usage());
    return 0;
  }
  try {
    await cmd.run(rest);
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      console.error(`error: ${e.message}\n\n${cmd.usage()}`);
      return 2;
    }
    // A model folder's part that fails only in use (a chat template on a later turn) is bad input too.
    if (e instanceof HfFolderError) {
      console.error(`error: ${e.message}`);
      return 2;
    }
    console.error(`error: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}

// Exit once stdout is flushed: a piped `logits --json` is longer than the pipe's buffer.
main(process.argv.slice(2)).then(
  (code) => process.stdout.write('', () => process.exit(code)),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
