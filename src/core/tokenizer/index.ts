export * from './vocab';
export * from './tokenizerJson';
export * from './tokenizer';
