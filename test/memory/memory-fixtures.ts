import { type Bus, type BusEvent, createBus } from '../../src/bus/index.js';
import {
  createMemoryService,
  type EmbeddingProvider,
  type MemoryConfigInput,
  type MemoryEventPayload,
  type MemoryService,
  type MemoryState,
  type SessionRef,
} from '../../src/memory/index.js';
import type { LanguageModel } from '../../src/model/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createManualClock, createSequentialIdGenerator } from '../../src/util/index.js';

export function sessionRef(key = 'main', agentId = 'alpha', sessionId = `s-${agentId}-${key}`): SessionRef {
  return { sessionId, sessionKey: `agent:${agentId}:${key}`, agentId };
}

/** An entry as a row of the tables every schema since migration 0002 has. */
export interface OldSchemaRow {
  memoryId: number;
  role: 'user' | 'assistant' | 'system';
  content: string;
  state?: MemoryState;
  orderKey?: number;
  relatedTo?: number;
}

/**
 * Writes `rows` of `ref`'s instance with the columns of migration 0002 only, as a memory service of that time
 * did: for tests of a migration, which start from a schema the service of today no longer writes.
 */
export async function insertOldSchemaRows(
  db: SqlDatabase,
  ref: SessionRef,
  rows: ReadonlyArray<OldSchemaRow>,
): Promise<void> {
  await db.run(
    'INSERT INTO memory_sessions (session_id, session_key, agent_id, created_at_ms, last_active_ms) VALUES (?, ?, ?, 1, 1) ' +
      'ON CONFLICT (session_id) DO NOTHING',
    [ref.sessionId, ref.sessionKey, ref.agentId],
  );
  for (const row of rows) {
    await db.run(
      'INSERT INTO memory_entries (session_key, memory_id, session_id, agent_id, kind, role, state, related_to, order_key, ' +
        "content, tokens, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, 'entry', ?, ?, ?, ?, ?, ?, ?, ?)",
      [
        ref.sessionKey,
        row.memoryId,
        ref.sessionId,
        ref.agentId,
        row.role,
        row.state ?? 'active',
        row.relatedTo ?? null,
        row.orderKey ?? row.memoryId,
        row.content,
        row.state === 'tombstone' ? 0 : Math.ceil(row.content.length / 4) + 4,
        row.memoryId,
        row.memoryId,
      ],
    );
  }
}

export interface MemoryHarness {
  memory: MemoryService;
  bus: Bus;
  clock: ReturnType<typeof createManualClock>;
  events: MemoryEventPayload[];
}

export function createHarness(
  db: SqlDatabase,
  options: {
    config?: MemoryConfigInput;
    model?: LanguageModel;
    embedder?: EmbeddingProvider;
    clock?: ReturnType<typeof createManualClock>;
  } = {},
): MemoryHarness {
  const bus = createBus();
  const clock = options.clock ?? createManualClock();
  const events: MemoryEventPayload[] = [];
  bus.on('memory:event', (event: BusEvent<'memory:event'>) => events.push(event.data));
  const memory = createMemoryService({
    db,
    bus,
    clock,
    idGenerator: createSequentialIdGenerator(),
    ...(options.config ? { config: options.config } : {}),
    ...(options.model ? { model: options.model } : {}),
    ...(options.embedder ? { embedder: options.embedder } : {}),
  });
  return { memory, bus, clock, events };
}

/** A model whose every call fails, to exercise the extractive fallback. */
export function failingModel(): LanguageModel & { calls: number } {
  const model = {
    specificationVersion: 'v1' as const,
    provider: 'test',
    modelId: 'failing',
    contextWindowTokens: 8_000,
    calls: 0,
    async *doStream() {
      model.calls++;
      yield { type: 'error' as const, error: { code: 'PROVIDER_ERROR', message: 'boom', retryable: false } };
    },
  };
  return model;
}

/** A model that summarizes by counting lines; optionally waits for `gate` before answering. */
export function countingModel(
  gate?: Promise<void>,
): LanguageModel & { requests: Array<{ purpose: unknown; text: string }> } {
  const model = {
    specificationVersion: 'v1' as const,
    provider: 'test',
    modelId: 'counting',
    contextWindowTokens: 8_000,
    requests: [] as Array<{ purpose: unknown; text: string }>,
    async *doStream(request: { messages: Array<{ content: string }>; metadata?: Record<string, unknown> }) {
      const text = request.messages[request.messages.length - 1]!.content;
      model.requests.push({ purpose: request.metadata?.purpose, text });
      if (gate) await gate;
      yield { type: 'text-delta' as const, text: `summary of ${text.split('\n').length} lines` };
      yield { type: 'usage' as const, usage: { inputTokens: 1, outputTokens: 1 } };
      yield { type: 'finish' as const, stopReason: 'end_turn' as const };
    },
  };
  return model as never;
}

/**
 * Budgeted recall's conversations about hangars: a row budget of 40 makes "hangar", in every turn, a word
 * whose newest matches are listed instead of ranked.
 */
export const hangars = {
  config: { maxActiveEntries: 64, recall: { promptMaxScoredRows: 40 } },
  ask: { agentId: 'alpha', sessionKey: 'agent:alpha:main', query: 'hangar' },
  turns: (key: string, from: number, count: number) =>
    Array.from({ length: count }, (_, index) => ({
      role: (from + index) % 2 ? ('user' as const) : ('assistant' as const),
      content: `${key} hangar ${from + index}`,
    })),
};
