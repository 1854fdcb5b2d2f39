import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectGateway, type GatewayClient } from '../../src/cli/gateway-client.js';
import { createScratchPostgresDatabase } from '../helpers/databases.js';
import { kill, serve } from '../helpers/serve-process.js';
import { tempHome } from '../runtime/helpers.js';

/**
 * kill -9 of a real `agentd serve` (the CLI in a child process) at seeded-random moments while chat turns and a work-queue
 * drain are running, then restart, on SQLite and on the real Postgres. Set AGENTD_CRASH_SEED to replay a run.
 */

const seed = Number(process.env.AGENTD_CRASH_SEED ?? 20261123);
const killsPerBackend = 3;
const messagesPerRound = 6;
const itemsPerRound = 5;
const sessionKeys = ['agent:main:main', 'agent:main:side'];

/** mulberry32: a small seeded generator, so a failing run can be replayed exactly. */
function random(seedValue: number): () => number {
  let state = seedValue >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Ledger {
  acknowledgedMessages: Map<string, string>;
  acknowledgedItems: Set<string>;
  kills: number;
}

/** Sends a round of messages and work items without waiting for replies; records what was acknowledged. */
function startRound(client: GatewayClient, round: number, ledger: Ledger): Promise<unknown> {
  const calls: Array<Promise<unknown>> = [];
  for (let index = 0; index < messagesPerRound; index++) {
    const runId = `run-${round}-${index}`;
    const text = `message ${round}.${index}`;
    calls.push(
      client
        .call('chat.send', {
          sessionKey: sessionKeys[index % sessionKeys.length],
          message: text,
          idempotencyKey: runId,
        })
        .then(
          () => ledger.acknowledgedMessages.set(text, runId),
          () => undefined,
        ),
    );
  }
  for (let index = 0; index < itemsPerRound; index++) {
    calls.push(
      client
        .call<{ id: string }>('work.submit', {
          kind: 'task',
          agentId: 'main',
          description: `item ${round}.${index}: say done`,
        })
        .then(
          (item) => ledger.acknowledgedItems.add(item.id),
          () => undefined,
        ),
    );
  }
  return Promise.allSettled(calls);
}

interface HistoryMessage {
  role: string;
  content: string | Array<{ text: string }>;
}
const textOf = (message: HistoryMessage) =>
  typeof message.content === 'string' ? message.content : message.content.map((part) => part.text).join('');

async function runCrashRounds(home: string, databaseUrl: string | undefined) {
  writeFileSync(
    join(home, 'agentd.yaml'),
    'work:\n  leaseMs: 600\n  pollIntervalMs: 1000\n  backoffBaseMs: 50\n  maxAttempts: 10\n',
  );
  const next = random(seed + (databaseUrl ? 1 : 0));
  const ledger: Ledger = { acknowledgedMessages: new Map(), acknowledgedItems: new Set(), kills: 0 };
  for (let round = 0; round < killsPerBackend; round++) {
    const served = await serve(home, databaseUrl);
    const client = await connectGateway({ url: served.url, token: served.token });
    const sent = startRound(client, round, ledger);
    // Anywhere from before the first acknowledgement to well into the turns and the drain (turns start
    // later on Postgres, so its window is wider).
    await new Promise((resolve) => setTimeout(resolve, Math.floor(next() * (databaseUrl ? 900 : 400))));
    await kill(served);
    ledger.kills++;
    await sent;
    await client.close().catch(() => {});
  }

  const crashedAt = Date.now();
  const served = await serve(home, databaseUrl);
  const client = await connectGateway({ url: served.url, token: served.token });
  try {
    // Everything acknowledged is answered (or visibly ended) and every acknowledged item is finished.
    const histories = async () => {
      const all: HistoryMessage[][] = [];
      for (const sessionKey of sessionKeys) {
        const result = await client.call<{ messages: HistoryMessage[] }>('chat.history', {
          sessionKey,
          limit: 1000,
        });
        all.push(result.messages);
      }
      return all;
    };
    await expect
      .poll(
        async () => {
          const health = await client.call<{ runs: { active: number } }>('health', {});
          const items = await client.call<{ items: Array<{ id: string; state: string }> }>('work.list', {
            limit: 1000,
          });
          const unfinished = items.items.filter(
            (item) => ledger.acknowledgedItems.has(item.id) && !['completed', 'failed'].includes(item.state),
          );
          return health.runs.active + unfinished.length;
        },
        { timeout: 20_000, interval: 200 },
      )
      .toBe(0);
    const settledMs = Date.now() - crashedAt;

    // Every acknowledged message sent again under its key, as a client that missed the answer would, is
    // answered with how its run ended: none runs again (the counts below would show it twice).
    for (const [text, runId] of ledger.acknowledgedMessages) {
      const index = Number(runId.split('-')[2]);
      const again = await client.call<{ runId: string; status: string; cached?: boolean }>('chat.send', {
        sessionKey: sessionKeys[index % sessionKeys.length],
        message: text,
        idempotencyKey: runId,
      });
      expect([runId, again.status, again.cached]).toEqual([
        runId,
        again.status === 'error' ? 'error' : 'ok',
        true,
      ]);
    }

    let interrupted = 0;
    const userCounts = new Map<string, number>();
    for (const messages of await histories()) {
      for (const [index, message] of messages.entries()) {
        if (message.role !== 'user') continue;
        userCounts.set(textOf(message), (userCounts.get(textOf(message)) ?? 0) + 1);
        // Every user message is followed by an assistant entry: the reply or the note of an interrupted turn.
        const reply = messages[index + 1];
        expect([textOf(message), reply?.role]).toEqual([textOf(message), 'assistant']);
        if (textOf(reply!).includes('agentd stopped before this reply')) interrupted++;
      }
    }
    for (const text of ledger.acknowledgedMessages.keys())
      expect([text, userCounts.get(text)]).toEqual([text, 1]);
    // Nothing appears twice, acknowledged or not (an unacknowledged message may have been stored).
    for (const [text, count] of userCounts) expect([text, count]).toEqual([text, 1]);

    const items = await client.call<{ items: Array<{ id: string; state: string; attempts: number }> }>(
      'work.list',
      { limit: 1000 },
    );
    const byId = new Map(items.items.map((item) => [item.id, item]));
    for (const id of ledger.acknowledgedItems) expect([id, byId.get(id)?.state]).toEqual([id, 'completed']);
    // An item runs again only when a kill caught it in flight: at most the pool's concurrency per kill.
    const rerun = items.items.filter((item) => item.attempts > 1).length;
    expect(rerun).toBeLessThanOrEqual(ledger.kills * 4);
    return {
      kills: ledger.kills,
      acknowledgedMessages: ledger.acknowledgedMessages.size,
      acknowledgedItems: ledger.acknowledgedItems.size,
      interrupted,
      rerun,
      settledMs,
    };
  } finally {
    await client.close();
    await kill(served);
  }
}

describe('kill -9 of agentd serve during chat turns and a work-queue drain', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup();
  });

  it('loses and duplicates nothing acknowledged on SQLite', async () => {
    const figures = await runCrashRounds(tempHome('agentd-crash-sqlite-'), undefined);
    console.log(`[crash suite] sqlite seed=${seed}`, JSON.stringify(figures));
    expect(figures.kills).toBe(killsPerBackend);
  }, 120_000);

  it('loses and duplicates nothing acknowledged on Postgres', async () => {
    const database = await createScratchPostgresDatabase('agentd_crash');
    cleanups.push(() => database.drop());
    const figures = await runCrashRounds(tempHome('agentd-crash-pg-'), database.url);
    console.log(`[crash suite] postgres seed=${seed}`, JSON.stringify(figures));
    expect(figures.kills).toBe(killsPerBackend);
  }, 120_000);
});
