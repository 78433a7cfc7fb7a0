/** The scheduler's view of a local model: a BatchedDecoder over a policy's weights. */
import { BatchedDecoder } from '../model/decode';
import type { Policy } from '../policy';
import type { ContextDecoder } from './scheduler';

export class PolicyDecoder implements ContextDecoder {
  readonly vocabSize: number;
  readonly maxPositions: number;
  private readonly decoder: BatchedDecoder;

  constructor(policy: Policy, capacity = 64) {
    this.vocabSize = policy.config.vocabSize;
    this.maxPositions = policy.config.nPositions;
    this.decoder = new BatchedDecoder(policy.params, policy.config, { capacity });
  }

  open(): number {
    return this.decoder.open();
  }

  close(slot: number): void {
    this.decoder.close(slot);
  }

  feed(slots: number[], tokens: number[][]): Promise<Float32Array> {
    return this.decoder.feed(slots, tokens);
  }

  dispose(): void {
    this.decoder.dispose();
  }
}
