export * from './violations';
export * from './grammar';
