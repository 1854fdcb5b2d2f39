import { afterAll, describe, expect, it } from 'vitest';
import { connectGateway } from '../../src/cli/gateway-client.js';
import { createScratchPostgresDatabase } from '../helpers/databases.js';
import { kill, serve } from '../helpers/serve-process.js';
import { tempHome } from '../runtime/helpers.js';

/**
 * kill -9 of a real `agentd serve` right after an agent's mailbox acknowledged a burst of messages and a task,
 * most of them not yet answered; the restarted server answers every one of them, and nothing twice that a
 * finished turn answered.
 */

const messages = 60;

interface ConversationEntry {
  sender: string;
  content: string;
}

async function crashWithAFullMailbox(home: string, databaseUrl: string | undefined) {
  const first = await serve(home, databaseUrl);
  const client = await connectGateway({ url: first.url, token: first.token });
  await client.call('agents.spawn', { id: 'clerk', name: 'Clerk' });
  const acknowledged: string[] = [];
  await Promise.all(
    Array.from({ length: messages }, (_, index) =>
      client
        .call('agents.message', { agentId: 'clerk', from: 'user', content: `note ${index}` })
        .then(() => acknowledged.push(`note ${index}`)),
    ),
  );
  const task = await client.call<{ task: { id: string } }>('agents.assign', {
    agentId: 'clerk',
    task: 'file the notes',
  });
  const atKill = await client.call<{ agent: { mailboxDepth: number } }>('agents.state', { agentId: 'clerk' });
  await kill(first);
  await client.close().catch(() => {});

  const second = await serve(home, databaseUrl);
  const again = await connectGateway({ url: second.url, token: second.token });
  try {
    await expect
      .poll(
        async () => {
          const state = await again.call<{ agent: { mailboxDepth: number; state: string } }>('agents.state', {
            agentId: 'clerk',
          });
          const tasks = await again.call<{ tasks: Array<{ id: string; status: string }> }>('agents.history', {
            agentId: 'clerk',
          });
          const settled = tasks.tasks.find((entry) => entry.id === task.task.id)?.status === 'completed';
          return state.agent.mailboxDepth === 0 && state.agent.state === 'idle' && settled;
        },
        { timeout: 30_000, interval: 100 },
      )
      .toBe(true);
    const { messages: conversation } = await again.call<{ messages: ConversationEntry[] }>(
      'agents.conversation',
      { agentId: 'clerk', limit: 1000 },
    );
    const received = conversation.filter((entry) => entry.sender !== 'clerk').map((entry) => entry.content);
    // Each acknowledged message is in the conversation once, written with its acknowledgement.
    expect(received.sort()).toEqual([...acknowledged, 'file the notes'].sort());
    const replies = conversation.filter((entry) => entry.sender === 'clerk').length;
    // Every message is answered; a turn the kill cut short may be answered twice (at least once delivery).
    expect(replies).toBeGreaterThanOrEqual(messages + 1);
    expect(replies).toBeLessThanOrEqual(messages + 2);
    return { waitingAtKill: atKill.agent.mailboxDepth, replies };
  } finally {
    await again.close();
    await kill(second);
  }
}

describe('kill -9 of agentd serve with messages waiting in an agent mailbox', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup();
  });

  it('answers every acknowledged message after the restart on SQLite', async () => {
    const figures = await crashWithAFullMailbox(tempHome('agentd-mailbox-crash-'), undefined);
    console.log('[mailbox crash] sqlite', JSON.stringify(figures));
    // The crash must have caught messages unanswered, or the test shows nothing.
    expect(figures.waitingAtKill).toBeGreaterThan(0);
  }, 60_000);

  it('answers every acknowledged message after the restart on Postgres', async () => {
    const database = await createScratchPostgresDatabase('agentd_mailbox');
    cleanups.push(() => database.drop());
    const figures = await crashWithAFullMailbox(tempHome('agentd-mailbox-crash-pg-'), database.url);
    console.log('[mailbox crash] postgres', JSON.stringify(figures));
    expect(figures.waitingAtKill).toBeGreaterThan(0);
  }, 60_000);
});
