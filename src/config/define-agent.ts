import { ErrorCodes, formatZodIssues, UserInputError } from '../util/index.js';
import { type AgentDefinition, agentDefinitionSchema } from './schema.js';

/**
 * Declares an agent in code, the same shape as an entry of `agents:` in agentd.yaml. Checked here so a bad
 * id fails where it is written: UserInputError(INVALID_CONFIG).
 */
export function defineAgent(definition: AgentDefinition): AgentDefinition {
  const parsed = agentDefinitionSchema.safeParse(definition);
  if (!parsed.success) {
    throw new UserInputError({
      code: ErrorCodes.invalidConfig,
      message: `agent "${String(definition?.id)}": ${formatZodIssues(parsed.error.issues)}`,
    });
  }
  return parsed.data;
}
