/**
 * `agentd/testing`: test doubles for code built on agentd. The fake provider servers live in the
 * repository's test/helpers (they are not shipped).
 */
export {
  createScriptedModel,
  type ScriptedModel,
  type ScriptedModelOptions,
  type ScriptedReply,
  type ScriptedResponder,
  type ScriptedStep,
  UnexpectedModelCallError,
  unexpectedModelCallCode,
} from './model/index.js';
