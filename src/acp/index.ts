export {
  type AcpAgentHost,
  type CreateAcpAgentOptions,
  createAcpAgent,
  promptText,
  toolKindOf,
} from './agent.js';
