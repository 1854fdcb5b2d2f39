import { createBus } from '../../../src/bus/index.js';
import type { AutoRecall } from '../../../src/chat/auto-recall.js';
import type { CreateChatServiceOptions, RunningRun } from '../../../src/chat/index.js';
import type { ChatContext } from '../../../src/chat/service/context.js';
import { TurnQueue } from '../../../src/chat/service/queue.js';
import type { MessageMark } from '../../../src/memory/index.js';
import type { UnrepliedRun } from '../../../src/store/index.js';
import {
  createKeyedMutex,
  createManualClock,
  createRecentMap,
  ErrorCodes,
  StringDictionary,
  SystemError,
  silentLogger,
} from '../../../src/util/index.js';

/** What the fakes saw, in order. */
export type Call = [string, ...unknown[]];

/** A chat context over hand-made sessions, memory and inbox that record their calls. */
export function fakeContext(
  overrides: {
    running?: RunningRun[];
    /** What `inbox.listUnreplied` finds. */
    unreplied?: UnrepliedRun[];
    touchFails?: boolean;
    activeSession?: string;
    summarized?: number[];
    slashCommands?: CreateChatServiceOptions['slashCommands'];
    runTurn?: CreateChatServiceOptions['runTurn'];
    /** The first this many session lookups fail as an unreachable store would. */
    sessionLookupFailures?: number;
    /** What `memory.recentMessageMarks` finds, newest first. */
    marks?: MessageMark[];
    /** The first this many appends fail as a full disk would. */
    appendFailures?: number;
  } = {},
) {
  const calls: Call[] = [];
  const clock = createManualClock(1_000);
  const bus = createBus();
  const events: Array<{ type: string; data: unknown }> = [];
  bus.subscribe({ types: ['run:started', 'run:text-delta', 'run:finished'] }, (event) =>
    events.push({ type: event.type, data: event.data }),
  );
  let activeTokens = 100;
  let lookupFailures = 0;
  let appendFailures = 0;
  const options = {
    sessions: {
      touch: async (id: string, touch: unknown) => {
        calls.push(['sessions.touch', id, touch]);
        if (overrides.touchFails) throw new Error('database is read-only');
        return undefined;
      },
      ensureActive: async (sessionKey: string, agentId: string) => {
        calls.push(['sessions.ensureActive', sessionKey, agentId]);
        if ((overrides.sessionLookupFailures ?? 0) > lookupFailures++)
          throw new SystemError({
            code: ErrorCodes.storeUnavailable,
            message: 'the connection was terminated',
            retryable: true,
          });
        return { id: `session-of-${sessionKey}` };
      },
      // As on Postgres, where no cache answers: every lookup is an `ensureActive`.
      async activeId(sessionKey: string, agentId: string) {
        return (await this.ensureActive(sessionKey, agentId)).id;
      },
      getActive: async (sessionKey: string) => {
        calls.push(['sessions.getActive', sessionKey]);
        return overrides.activeSession ? { id: overrides.activeSession } : undefined;
      },
      archive: async (sessionKey: string, reason: string) => {
        calls.push(['sessions.archive', sessionKey, reason]);
      },
    },
    memory: {
      append: async (ref: unknown, input: { content: string }, within?: () => Promise<void>) => {
        calls.push(['memory.append', ref, input]);
        if ((overrides.appendFailures ?? 0) > appendFailures++)
          throw new SystemError({
            code: ErrorCodes.storeUnavailable,
            message: 'database or disk is full',
            retryable: true,
          });
        const address = `mem:${calls.length}`;
        await within?.();
        return { address };
      },
      archive: async (sessionId: string, reason: string) => {
        calls.push(['memory.archive', sessionId, reason]);
      },
      stats: async () => ({ activeTokens, activeEntries: activeTokens / 10 }),
      summarize: async () => {
        activeTokens = 40;
        return { summarizedIds: overrides.summarized ?? [] };
      },
      pin: async (ref: unknown) => {
        calls.push(['memory.pin', ref]);
        return {
          entries: [
            { memoryId: 1, state: 'active', role: 'user', content: 'earlier' },
            { memoryId: 2, state: 'summarized', role: 'user', content: 'older' },
          ],
          // What memory gives for those entries: the active one's message.
          modelMessages: () => [{ role: 'user', content: 'earlier' }],
          release: () => calls.push(['lease.release']),
        };
      },
      appendBatch: async (ref: unknown, inputs: unknown[], within?: () => Promise<void>) => {
        calls.push(['memory.appendBatch', ref, inputs]);
        await within?.();
        return inputs.map((input, index) => ({ ...(input as object), address: `batch:${index}` }));
      },
      recentMessageMarks: async (read: { sinceMs: number; maxEntries: number }) => {
        calls.push(['memory.recentMessageMarks', read]);
        return (overrides.marks ?? []).slice(0, read.maxEntries);
      },
      persist: async (ref: unknown, work: () => Promise<void>) => {
        calls.push(['memory.persist', ref]);
        await work();
      },
    },
    identity: { systemPrompt: async () => 'You are agentd.' },
    ...(overrides.slashCommands ? { slashCommands: overrides.slashCommands } : {}),
    ...(overrides.runTurn ? { runTurn: overrides.runTurn } : {}),
    inbox: {
      delete: async (runId: string) => {
        calls.push(['inbox.delete', runId]);
      },
      markRunning: async (run: { runId: string; activity: unknown }) => {
        calls.push(['inbox.markRunning', run.runId, run.activity]);
      },
      listRunning: async () => overrides.running ?? [],
      markEnded: async (run: { runId: string; activity?: unknown }) => {
        calls.push(['inbox.markEnded', run.runId, ...(run.activity ? [run.activity] : [])]);
      },
      markEndedWithoutReply: async (run: { runId: string; status: string; error?: { code: string } }) => {
        calls.push([
          'inbox.markEndedWithoutReply',
          run.runId,
          run.status,
          ...(run.error ? [run.error.code] : []),
        ]);
      },
      listUnreplied: async () => overrides.unreplied ?? [],
    },
    bus,
    clock,
  } as unknown as CreateChatServiceOptions;
  const ctx: ChatContext = {
    options,
    clock,
    logger: silentLogger,
    maxMessageChars: 1_000,
    maxRememberedRuns: 2,
    autoRecall: false,
    autoRecallBlocks: {
      forget: (sessionId: string) => calls.push(['autoRecall.forget', sessionId]),
    } as unknown as AutoRecall,
    storeRetryMs: 250,
    storeRetryForMs: 30_000,
    lanes: createKeyedMutex(),
    live: new Map(),
    finished: new Map(),
    endedBeforeStart: createRecentMap({ windowMs: 600_000, maxEntries: 10_000, clock }),
    endedRunsWindowMs: 600_000,
    maxEndedRunsRead: 10_000,
    recovering: undefined,
    injectedKeys: createRecentMap({ windowMs: 600_000, maxEntries: 10_000, clock }),
    waiters: new Map(),
    running: new Set(),
    unsettledTurns: new StringDictionary(),
    queue: new TurnQueue({ maxPerSession: 32, maxTotal: 1_000 }),
  };
  return { ctx, calls, events, clock };
}
