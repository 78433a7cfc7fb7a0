export * from './config';
export * from './trace';
export * from './scheduler';
export * from './format';
export * from './policyDecoder';
