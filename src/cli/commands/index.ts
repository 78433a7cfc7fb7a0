import type { Command } from '../command';
import { init } from './init';
import { logits } from './logits';
import { rollout } from './rollout';
import { sft } from './sft';
import { train } from './train';
import { evaluate } from './eval';
import { frontierCommand } from './frontier';
import { report } from './report';
import { compare } from './compare';
import { lookup } from './lookup';
import { probeLookup } from './probeLookup';
import { importVerl } from './importVerl';
import { exportVerl } from './exportVerl';
import { generate } from './generate';
import { mergeLora } from './mergeLora';

export const COMMANDS: Record<string, Command> = {
  init,
  rollout,
  logits,
  sft,
  train,
  eval: evaluate,
  frontier: frontierCommand,
  report,
  compare,
  lookup,
  'probe-lookup': probeLookup,
  'import-verl': importVerl,
  'export-verl': exportVerl,
  generate,
  // The name it had while Hugging Face models trained beside the toy: now `train --model`.
  'train-lm': train,
  'merge-lora': mergeLora,
};
