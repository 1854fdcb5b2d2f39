import type { ChatService as ChatTurns } from '../chat/index.js';
import type {
  AgentDirectoryService,
  DevicePairings,
  GatewayServices,
  HealthService,
  ModelCatalogService,
  ModelEntry,
  PairedDevice,
  SessionSummary,
} from '../gateway/index.js';
import type { MemoryService } from '../memory/index.js';
import type { KvStore, SessionRecord, SessionStore } from '../store/index.js';
import { parseSessionKey } from '../store/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';

/** `agent:main:web#12` → `12`. */
function localMemoryId(address: string): string {
  return address.slice(address.lastIndexOf('#') + 1);
}

function agentOf(sessionKey: string): string {
  return parseSessionKey(sessionKey)?.agentId ?? 'main';
}

function summaryOf(record: SessionRecord): SessionSummary {
  const metadata = record.metadata as { label?: string; model?: string; thinkingLevel?: string };
  return {
    key: record.sessionKey,
    sessionId: record.id,
    agentId: record.agentId,
    createdAt: record.createdAt,
    updatedAt: record.lastActiveAt,
    messageCount: record.messageCount,
    ...(metadata.label ? { label: metadata.label } : record.title ? { label: record.title } : {}),
    ...(record.summary ? { summary: record.summary } : {}),
    ...(metadata.model ? { model: metadata.model } : {}),
    ...(metadata.thinkingLevel ? { thinkingLevel: metadata.thinkingLevel } : {}),
    ...(record.status === 'archived' ? { archived: true } : {}),
  };
}

/** Adapts the chat service, session store and memory to the interfaces the gateway calls. */
export function createGatewayServices(options: {
  chat: ChatTurns;
  sessions: SessionStore;
  memory: MemoryService;
  health: HealthService;
  models: ModelCatalogService;
  agents: AgentDirectoryService;
}): GatewayServices {
  const { chat, sessions, memory } = options;
  return {
    chat: {
      async send({ sessionKey, agentId, text, idempotencyKey }) {
        const ack = await chat.send({ sessionKey, agentId, text, idempotencyKey });
        if (ack.status !== 'ended') return ack;
        const { status, error } = ack.record;
        return {
          runId: ack.runId,
          status: 'ended',
          outcome: { status: status === 'running' ? 'error' : status, ...(error ? { error } : {}) },
        };
      },
      wait: async (runId, waitOptions) => {
        const record = await chat.wait(runId, waitOptions);
        return {
          runId: record.runId,
          status: record.status === 'running' ? 'error' : record.status,
          text: record.text,
          // The per-session MemoryID (the Spiderweb wire form); the run's session key makes it global.
          ...(record.assistantMemoryId ? { assistantMemoryId: localMemoryId(record.assistantMemoryId) } : {}),
          ...(record.userMemoryId ? { userMemoryId: localMemoryId(record.userMemoryId) } : {}),
          ...(record.error ? { error: record.error } : {}),
          startedAt: record.startedAt,
          ...(record.endedAt ? { endedAt: record.endedAt } : {}),
          ...(record.usage ? { usage: record.usage } : {}),
        };
      },
      abort: (input) => chat.abort(input),
      inject: ({ sessionKey, role, text, label, idempotencyKey }) =>
        chat.inject({
          sessionKey,
          agentId: agentOf(sessionKey),
          role,
          text,
          ...(label ? { label } : {}),
          ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
        }),
      async history({ sessionKey, limit, beforeMemoryId }) {
        const before =
          beforeMemoryId === undefined
            ? undefined
            : Number(beforeMemoryId.slice(beforeMemoryId.lastIndexOf('#') + 1));
        if (before !== undefined && !Number.isSafeInteger(before)) {
          throw new UserInputError({
            code: ErrorCodes.invalidRequest,
            message: `beforeMemoryId ${beforeMemoryId} is not a memory id`,
          });
        }
        const session = await sessions.getActive(sessionKey);
        const entries = await memory.history(sessionKey, {
          limit: limit + 1,
          ...(before !== undefined ? { beforeMemoryId: before } : {}),
        });
        const hasMore = entries.length > limit;
        const page = hasMore ? entries.slice(entries.length - limit) : entries;
        return {
          sessionKey,
          sessionId: session?.id ?? '',
          messages: page.map((entry) => ({
            role: entry.role,
            content: entry.content,
            memoryId: entry.address,
            timestamp: entry.createdAtMs,
          })),
          hasMore,
        };
      },
    },
    sessions: {
      async list({ agentId, limit, includeArchived, search }) {
        const records = await sessions.list({ ...(agentId ? { agentId } : {}), includeArchived, limit });
        const needle = search?.toLowerCase();
        return records
          .map(summaryOf)
          .filter(
            (summary) =>
              !needle ||
              summary.key.toLowerCase().includes(needle) ||
              summary.label?.toLowerCase().includes(needle),
          );
      },
      async preview({ keys, limit, maxChars }) {
        return Promise.all(
          keys.map(async (key) => {
            const entries = await memory.history(key, { limit });
            if (entries.length === 0 && !(await sessions.getActive(key)))
              return { key, status: 'missing' as const, items: [] };
            return {
              key,
              status: 'ok' as const,
              items: entries.map((entry) => ({ role: entry.role, text: entry.content.slice(0, maxChars) })),
            };
          }),
        );
      },
      async reset({ sessionKey, reason, archive }) {
        const result = await chat.reset({ sessionKey, agentId: agentOf(sessionKey), reason, archive });
        return { sessionKey, ...result };
      },
      async delete({ sessionKey, deleteTranscript }) {
        await chat.abort({ sessionKey });
        if (deleteTranscript) await memory.deleteSessionKey(sessionKey);
        else {
          const active = await sessions.getActive(sessionKey);
          if (active) await memory.archive(active.id, 'deleted', { requireCommit: true });
        }
        const count = await sessions.delete(sessionKey);
        return { deleted: count > 0 };
      },
      compact: ({ sessionKey }) => chat.compact({ sessionKey, agentId: agentOf(sessionKey) }),
      async patch({ sessionKey, label, model, thinkingLevel }) {
        const record = await sessions.ensureActive(sessionKey, agentOf(sessionKey));
        const metadata: Record<string, unknown> = { ...record.metadata };
        for (const [key, value] of Object.entries({ label, model, thinkingLevel })) {
          if (value === null) delete metadata[key];
          else if (value !== undefined) metadata[key] = value;
        }
        const patched = await sessions.patch(record.id, {
          metadata,
          ...(label !== undefined ? { title: label } : {}),
        });
        return summaryOf(patched ?? record);
      },
      async describe({ sessionKey }) {
        const record = await sessions.getActive(sessionKey);
        return record ? summaryOf(record) : undefined;
      },
      async create({ sessionKey, agentId, label }) {
        const existing = await sessions.getActive(sessionKey);
        const record = existing ?? (await sessions.ensureActive(sessionKey, agentId));
        if (existing || label === undefined) return { session: summaryOf(record), created: !existing };
        const labelled = await sessions.patch(record.id, {
          metadata: { ...record.metadata, label },
          title: label,
        });
        return { session: summaryOf(labelled ?? record), created: true };
      },
    },
    models: options.models,
    agents: options.agents,
    memory: {
      async query({ sessionKey, agentId, topic, memoryIds, kind, limit, includeArchived }) {
        const items = await memory.query({
          agentId,
          sessionKey,
          ...(topic ? { topic } : {}),
          ...(memoryIds ? { memoryIds: memoryIds.map((id) => (/^\d+$/.test(id) ? Number(id) : id)) } : {}),
          kind,
          limit,
          includeArchived,
        });
        return { items: items as unknown as Array<{ kind: 'summary' | 'entry' } & Record<string, unknown>> };
      },
      async recall({ sessionKey, agentId, limit, includeArchived, includeFull }) {
        const items = await memory.recall({ agentId, sessionKey, limit, includeArchived, includeFull });
        return { items: items as unknown as Array<{ kind: 'summary' | 'entry' } & Record<string, unknown>> };
      },
    },
    health: options.health,
  };
}

const devicesNamespace = 'gateway-devices';

/** Paired OpenClaw devices in the key-value store, so a device keeps exactly its scopes across restarts. */
export function createStoredDevicePairings(kv: KvStore): DevicePairings {
  return {
    async get(deviceId) {
      const value = await kv.get(devicesNamespace, deviceId);
      return value === undefined ? undefined : (JSON.parse(value) as PairedDevice);
    },
    async put(device) {
      await kv.set(devicesNamespace, device.deviceId, JSON.stringify(device));
    },
  };
}

/**
 * The models agentd is configured with: the runtime's default and every agent's own, as the gateway lists
 * them. A name without a provider (`gpt-4o`) belongs to the default model's provider.
 */
export function createModelCatalog(options: {
  defaultModel: string;
  agents: ReadonlyArray<{ id: string; model?: string | undefined }>;
  contextWindowFor: (modelId: string) => number;
}): ModelCatalogService {
  const entryOf = (name: string, fallbackProvider: string): ModelEntry => {
    const slash = name.indexOf('/');
    const provider = slash > 0 ? name.slice(0, slash) : fallbackProvider;
    const id = slash > 0 ? name.slice(slash + 1) : name;
    return { id, provider, contextWindow: options.contextWindowFor(id), local: provider === 'local' };
  };
  const fallback = entryOf(options.defaultModel, 'local');
  const byAgent = new Map(
    options.agents
      .filter((agent) => agent.model !== undefined)
      .map((agent) => [agent.id, entryOf(agent.model as string, fallback.provider)]),
  );
  const all = [fallback, ...byAgent.values()].filter(
    (entry, index, list) =>
      list.findIndex((other) => other.provider === entry.provider && other.id === entry.id) === index,
  );
  return {
    list: () => all.map((entry) => ({ ...entry })),
    forAgent: (agentId) => ({ ...(byAgent.get(agentId) ?? fallback) }),
  };
}
