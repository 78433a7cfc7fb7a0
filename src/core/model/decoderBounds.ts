/**
 * The largest value a Hugging Face config.json field may take here, by its name in the file: far
 * past every published model (Llama 3.1 405B: 126 layers, hidden 16,384, 128 heads, intermediate
 * 53,248; vocabularies up to about 260,000; contexts up to about 10 million positions), and small
 * enough that the tensor list a config implies stays small: a layer count of 10⁸ is refused by
 * name before anything is built for it. Whether the weights hold what the config needs is checked
 * against the weights themselves (decoderParams).
 */
export const HF_CONFIG_MAX: Readonly<Record<string, number>> = {
  num_hidden_layers: 512,
  n_layer: 512,
  hidden_size: 65_536,
  n_embd: 65_536,
  intermediate_size: 1 << 20,
  n_inner: 1 << 20,
  num_attention_heads: 1024,
  n_head: 1024,
  num_key_value_heads: 1024,
  head_dim: 1024,
  vocab_size: 1 << 22,
  max_position_embeddings: 1 << 24,
  n_positions: 1 << 24,
};

/** Why `value` is outside its field's bound, or null. */
export function hfConfigBoundError(field: string, value: number): string | null {
  const max = HF_CONFIG_MAX[field];
  return max !== undefined && value > max ? `${field} must be an integer in [1, ${max.toLocaleString('en')}] (got ${value.toLocaleString('en')})` : null;
}
