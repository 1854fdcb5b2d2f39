import type { ModelMessage } from '../model/index.js';
import { truncateText } from './text.js';
import type { MemoryEntry, MemoryItem, MemorySource } from './types.js';

export function sourceOf(entry: MemoryEntry): MemorySource {
  if (entry.archivedAtMs !== null) return 'archive';
  return entry.state === 'active' || entry.state === 'tombstone' ? 'ram' : 'ltm';
}

/** The Spiderweb `memory.query` / `memory.recall` item for an entry. */
export function toMemoryItem(
  entry: MemoryEntry,
  options: { includeFull: boolean; previewChars: number },
): MemoryItem {
  if (entry.kind === 'summary') {
    return {
      kind: 'summary',
      source: sourceOf(entry),
      id: entry.memoryId,
      source_id: entry.sourceIds?.[0] ?? null,
      created_at_ms: entry.createdAtMs,
      text: entry.content,
      sessionKey: entry.sessionKey,
      address: entry.address,
      source_ids: entry.sourceIds ?? [],
    };
  }
  const content = options.includeFull
    ? { text: entry.content, truncated: false }
    : truncateText(entry.content, options.previewChars);
  return {
    kind: 'entry',
    source: sourceOf(entry),
    id: entry.memoryId,
    role: entry.role,
    state: entry.state,
    related_to: entry.relatedTo,
    content: content.text,
    created_at_ms: entry.createdAtMs,
    sessionKey: entry.sessionKey,
    address: entry.address,
    ...(content.truncated ? { truncated: true } : {}),
  };
}

/** The model message of one active entry (summaries become system messages). */
export function modelMessageOf(entry: MemoryEntry): ModelMessage {
  if (entry.kind === 'summary')
    return { role: 'system', content: `Summary of earlier conversation: ${entry.content}` };
  if (entry.role === 'assistant')
    return entry.toolCalls?.length
      ? { role: 'assistant', content: entry.content, toolCalls: entry.toolCalls }
      : { role: 'assistant', content: entry.content };
  if (entry.role === 'tool')
    return {
      role: 'tool',
      toolCallId: entry.toolCallId ?? '',
      toolName: entry.toolName ?? '',
      content: entry.content,
      ...(entry.isError ? { isError: true } : {}),
    };
  return { role: entry.role, content: entry.content };
}

/**
 * Rebuilds the model conversation from `load()`: summaries become system messages, assistant tool calls
 * and tool results keep their ids so providers can pair them. (A pin lease's `modelMessages()` gives the
 * same conversation from messages made once per entry.)
 */
export function toModelMessages(entries: ReadonlyArray<MemoryEntry>): ModelMessage[] {
  const messages: ModelMessage[] = [];
  for (const entry of entries) if (entry.state === 'active') messages.push(modelMessageOf(entry));
  return messages;
}

/** Parses a global address `<sessionKey>#<n>`. */
export function parseMemoryAddress(address: string): { sessionKey: string; memoryId: number } | undefined {
  const hash = address.lastIndexOf('#');
  if (hash <= 0) return undefined;
  const memoryId = Number(address.slice(hash + 1));
  if (!Number.isSafeInteger(memoryId) || memoryId < 1) return undefined;
  return { sessionKey: address.slice(0, hash), memoryId };
}
