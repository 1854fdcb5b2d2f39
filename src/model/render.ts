import type { ModelRequest } from './spec.js';

/**
 * A conversation as plain text, for backends that take one prompt (CLI models). Roles become headings;
 * tool calls and results are written out so the backend sees what happened. Tools themselves are not
 * offered: a CLI backend answers in text only.
 */
export function renderConversation(request: ModelRequest): string {
  const parts: string[] = [];
  for (const message of request.messages) {
    switch (message.role) {
      case 'system':
        parts.push(`System:\n${message.content}`);
        break;
      case 'user':
        parts.push(`User:\n${message.content}`);
        break;
      case 'assistant': {
        const calls = (message.toolCalls ?? []).map(
          (call) => `[called ${call.name} ${JSON.stringify(call.arguments)}]`,
        );
        parts.push(`Assistant:\n${[message.content, ...calls].filter(Boolean).join('\n')}`);
        break;
      }
      case 'tool':
        parts.push(
          `Tool result (${message.toolName}${message.isError ? ', failed' : ''}):\n${message.content}`,
        );
        break;
    }
  }
  if (request.responseFormat) {
    const schema = request.responseFormat.schema;
    parts.push(
      schema
        ? `Reply with only a JSON object that matches this JSON Schema:\n${JSON.stringify(schema)}`
        : 'Reply with only a JSON object.',
    );
  }
  return `${parts.join('\n\n')}\n`;
}
