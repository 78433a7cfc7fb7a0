export * from './config';
export { type GPTParams, type ParamOptions, initParams, paramsFromArrays, paramsToArrays, disposeParams, cloneParams } from './params';
export { type TokenBatch, forwardLogits, targetLogProbs, maskedTokenLoss } from './gpt';
export { type DecoderOptions, BatchedDecoder } from './decode';
export { type SampleOptions, type Sampled, sampleFromLogits, topKProbs, validateSampleOptions } from './sample';
