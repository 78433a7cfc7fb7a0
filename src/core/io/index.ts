/** Import/export formats: safetensors, HF GPT-2 config.json, the checkpoint file set. */
export {
  encodeSafetensors,
  decodeSafetensors,
  halfToFloat,
  SafetensorsError,
  type SafetensorsDtype,
  type TensorToEncode,
  type DecodedTensor,
  type DecodedSafetensors,
} from './safetensors';
export { toHfConfig, fromHfConfig, type HfGpt2Config } from './hfConfig';
export {
  encodeCheckpoint,
  decodeCheckpoint,
  makeSelfcestMeta,
  CheckpointError,
  CHECKPOINT_FILES,
  REQUIRED_CHECKPOINT_FILES,
  OPTIONAL_CHECKPOINT_FILES,
  CHECKPOINT_FORMAT,
  SELFCEST_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
  type Checkpoint,
  type SelfcestMeta,
} from './checkpoint';
export { parseTracesJsonl, tracesToJsonl, TraceFormatError } from './traces';
