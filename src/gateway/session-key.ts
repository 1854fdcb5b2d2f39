import { ErrorCodes, UserInputError } from '../util/index.js';

const agentIdPattern = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const maxSessionKeyLength = 256;

export const defaultAgentId = 'main';
export const mainKey = 'main';

export function isValidAgentId(agentId: string): boolean {
  return agentIdPattern.test(agentId);
}

/**
 * Accepts a full key `agent:<agentId>:<rest>` or a short key (`main`, `work`) that is taken to belong to the
 * default agent, like OpenClaw does. Anything else (control characters, other key families) is refused so
 * that a key is always safe to log, index and put in a URL.
 */
export function resolveSessionKey(
  raw: string,
  fallbackAgentId = defaultAgentId,
): { sessionKey: string; agentId: string } {
  const key = raw.trim();
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
  if (key.length === 0 || key.length > maxSessionKeyLength || /[\u0000-\u001f\u007f]/.test(key)) {
    throw invalidKey(raw);
  }
  if (key.startsWith('agent:')) {
    const rest = key.slice('agent:'.length);
    const separator = rest.indexOf(':');
    if (separator <= 0 || separator === rest.length - 1) throw invalidKey(raw);
    const agentId = rest.slice(0, separator);
    if (!isValidAgentId(agentId)) throw invalidKey(raw);
    return { sessionKey: key, agentId };
  }
  if (key.includes(':') || !isValidAgentId(fallbackAgentId)) throw invalidKey(raw);
  return { sessionKey: `agent:${fallbackAgentId}:${key}`, agentId: fallbackAgentId };
}

export function mainSessionKey(agentId: string): string {
  return `agent:${agentId}:${mainKey}`;
}

function invalidKey(raw: string): UserInputError {
  return new UserInputError({
    code: ErrorCodes.invalidRequest,
    message: `invalid session key ${JSON.stringify(raw.slice(0, 80))}: use agent:<agentId>:<key> or a short key such as "main".`,
  });
}
