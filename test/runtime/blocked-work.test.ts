import { Command } from 'commander';
import { describe, expect, it, vi } from 'vitest';
import { registerWorkCommands } from '../../src/cli/commands/work.js';
import type { LanguageModel, ModelRequest, ModelStreamEvent } from '../../src/model/index.js';
import { startRuntime } from './helpers.js';

/**
 * A model that reports itself blocked on the deploy task until its context holds the unblock answer, and
 * records every request so the test can read what each run was told.
 */
function blockingModel(): LanguageModel & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    specificationVersion: 'v1',
    provider: 'scripted',
    modelId: 'blocking',
    contextWindowTokens: 100_000,
    requests,
    async *doStream(request): AsyncIterable<ModelStreamEvent> {
      requests.push(request);
      const all = request.messages.map((message) => message.content).join('\n');
      const last = request.messages.at(-1)!;
      const deploy = request.messages.some(
        (message) => message.role === 'user' && message.content.startsWith('Task: Deploy'),
      );
      if (deploy && !all.includes('Unblocked:') && last.role === 'user') {
        yield {
          type: 'tool-call',
          toolCall: {
            id: 'call_block',
            name: 'report_blocked',
            arguments: { reason: 'The deploy needs a production token.', needs: 'a deploy token' },
          },
        };
        yield { type: 'finish', stopReason: 'tool_calls' };
        return;
      }
      yield { type: 'text-delta', text: all.includes('Unblocked:') ? 'Deployed with the token.' : 'Done.' };
      yield { type: 'finish', stopReason: 'end_turn' };
    },
  };
}

async function cli(home: string, ...args: string[]): Promise<string> {
  const { createStore } = await import('../../src/store/index.js');
  const { createLedger } = await import('../../src/ledger/index.js');
  const { createWorkQueue } = await import('../../src/work/index.js');
  let stdout = '';
  const program = new Command().exitOverride();
  registerWorkCommands(program, {
    openWork: async () => {
      const store = await createStore({ stateDir: home });
      return {
        queue: createWorkQueue({ db: store.db }),
        ledger: createLedger({ db: store.db }),
        close: () => store.close(),
      };
    },
    io: { stdout: (text) => (stdout += text), stderr: (text) => (stdout += text) },
    setExitCode: () => undefined,
  });
  await program.parseAsync(['node', 'agentd', ...args]);
  return stdout;
}

describe('blocked work through the gateway', () => {
  it('an agent reports itself blocked; the item waits, is reported everywhere and resumes with the answer', async () => {
    const model = blockingModel();
    const started = await startRuntime({ model });
    const client = await started.connect();
    try {
      const blockedEvents: any[] = [];
      client.onEvent((event, payload) => {
        if (event === 'agent.blocked') blockedEvents.push(payload);
      });
      const submitted = await client.call<{ id: string }>('work.submit', {
        kind: 'task',
        title: 'Deploy the site',
        description: 'Deploy the site to production.',
      });
      const id = submitted.id;
      await vi.waitFor(
        async () => {
          const { item } = await client.call<{ item: { state: string } }>('work.get', { id });
          expect(item.state).toBe('blocked');
        },
        { timeout: 15_000, interval: 50 },
      );
      const { item, ledger } = await client.call<{ item: any; ledger: any[] }>('work.get', { id });
      expect(item.stateReason).toBe('The deploy needs a production token. (needs: a deploy token)');
      expect(item.leaseOwner).toBeNull();
      expect(ledger.map((entry) => entry.content)).toContain(
        'Blocked: The deploy needs a production token. (needs: a deploy token)',
      );

      // work list (gateway and CLI) shows it with its reason.
      const listed = await client.call<{ items: any[] }>('work.list', { state: 'blocked' });
      expect(listed.items.map((entry) => entry.id)).toEqual([id]);
      const table = await cli(started.runtime.config.home, 'work', 'list', '--state', 'blocked');
      expect(table).toContain(`${id}`);
      expect(table).toContain('blocked: The deploy needs a production token. (needs: a deploy token)');

      // The heartbeat reports it, as an agent.blocked event with the reason.
      const sweep = await started.runtime.work.heartbeat!.sweep();
      expect(sweep.blocked).toContain(id);
      await vi.waitFor(() => expect(blockedEvents.some((event) => event.workItemId === id)).toBe(true), {
        timeout: 5_000,
      });
      const reported = blockedEvents.find((event) => event.workItemId === id);
      expect(reported.reason).toContain('needs: a deploy token');
      expect(reported.condition).toBe('blocked');

      // Other work sees it in its awareness digest.
      const other = await client.call<{ id: string }>('work.submit', {
        kind: 'task',
        title: 'Write the changelog',
        description: 'Write it.',
      });
      await vi.waitFor(
        async () => {
          const got = await client.call<{ item: { state: string } }>('work.get', { id: other.id });
          expect(got.item.state).toBe('completed');
        },
        { timeout: 15_000, interval: 50 },
      );
      const otherRequest = model.requests.find((request) =>
        request.messages.some((message) => message.content.startsWith('Task: Write the changelog')),
      )!;
      const system = otherRequest.messages[0]!.content;
      expect(system).toContain('Blocked (waiting for help):');
      expect(system).toContain('Deploy the site');
      expect(system).toContain('needs: a deploy token');

      // Unblocking with the answer re-queues it; the next run starts from the answer and completes.
      await expect(client.call('work.unblock', { id: other.id })).rejects.toMatchObject({ code: 'CONFLICT' });
      const unblocked = await client.call<{ item: { state: string } }>('work.unblock', {
        id,
        note: 'Use the token in the vault under deploy/prod.',
      });
      expect(unblocked.item.state).toBe('queued');
      await vi.waitFor(
        async () => {
          const got = await client.call<{ item: any }>('work.get', { id });
          expect(got.item.state).toBe('completed');
        },
        { timeout: 15_000, interval: 50 },
      );
      const resumed = model.requests.filter((request) =>
        request.messages.some((message) => message.content.startsWith('Task: Deploy')),
      );
      const lastRun = resumed.at(-1)!.messages.find((message) => message.role === 'user')!.content;
      expect(lastRun).toContain('Blocked: The deploy needs a production token.');
      expect(lastRun).toContain('Unblocked: Use the token in the vault under deploy/prod.');
      const done = await client.call<{ item: any }>('work.get', { id });
      expect(done.item.outcome.data.summary).toBe('Deployed with the token.');
    } finally {
      await client.close();
      await started.runtime.close();
    }
  }, 60_000);

  it('work.block refuses bad input and finished work with stable codes', async () => {
    const started = await startRuntime({ model: blockingModel() });
    const client = await started.connect();
    try {
      await expect(client.call('work.block', { id: 'work_missing', reason: 'x' })).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      await expect(client.call('work.block', { id: 'work_missing', reason: '   ' })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
      });
      const { id } = await client.call<{ id: string }>('work.submit', {
        kind: 'task',
        title: 'Write it',
        description: 'Write.',
      });
      await vi.waitFor(
        async () => {
          const got = await client.call<{ item: { state: string } }>('work.get', { id });
          expect(got.item.state).toBe('completed');
        },
        { timeout: 15_000, interval: 50 },
      );
      await expect(client.call('work.block', { id, reason: 'late' })).rejects.toMatchObject({
        code: 'CONFLICT',
      });
    } finally {
      await client.close();
      await started.runtime.close();
    }
  }, 60_000);
});
