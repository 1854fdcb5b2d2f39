import { Command } from 'commander';
import { describe, expect, it, vi } from 'vitest';
import { registerWorkCommands } from '../../src/cli/commands/work.js';
import { createLedger } from '../../src/ledger/index.js';
import type { LanguageModel, ModelRequest, ModelStreamEvent } from '../../src/model/index.js';
import { createStore } from '../../src/store/index.js';
import { createWorkQueue, memoryMaintenanceKind } from '../../src/work/index.js';
import { startRuntime } from './helpers.js';

function recordingModel(): LanguageModel & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    specificationVersion: 'v1',
    provider: 'scripted',
    modelId: 'recording',
    contextWindowTokens: 100_000,
    requests,
    async *doStream(request): AsyncIterable<ModelStreamEvent> {
      requests.push(request);
      yield { type: 'text-delta', text: 'Done.' };
      yield { type: 'finish', stopReason: 'end_turn' };
    },
  };
}

async function cli(home: string, ...args: string[]): Promise<{ stdout: string; exitCode: number }> {
  let stdout = '';
  let exitCode = 0;
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
    setExitCode: (code) => (exitCode = code),
  });
  await program.parseAsync(['node', 'agentd', ...args]);
  return { stdout, exitCode };
}

describe('system work', () => {
  it('memory maintenance is its own class: hidden from work list and the digest unless asked for', async () => {
    const model = recordingModel();
    const started = await startRuntime({ model });
    const client = await started.connect();
    const done = async (id: string) =>
      vi.waitFor(
        async () => {
          const got = await client.call<{ item: { state: string } }>('work.get', { id });
          expect(got.item.state).toBe('completed');
        },
        { timeout: 15_000, interval: 50 },
      );
    try {
      const maintenance = await client.call<{ id: string }>('work.submit', {
        kind: memoryMaintenanceKind,
        title: 'memory maintenance',
        agentId: 'system',
      });
      const task = await client.call<{ id: string }>('work.submit', {
        kind: 'task',
        title: 'Write the changelog',
        description: 'Write it.',
      });
      await done(maintenance.id);
      await done(task.id);

      const ids = async (params: Record<string, unknown>) =>
        (await client.call<{ items: Array<{ id: string }> }>('work.list', params)).items.map(
          (item) => item.id,
        );
      expect(await ids({})).toEqual([task.id]);
      // The runtime's own maintenance timer may add a pass meanwhile: whatever it adds is system work.
      const systemItems = (
        await client.call<{ items: Array<{ id: string; kind: string }> }>('work.list', { class: 'system' })
      ).items;
      expect(systemItems.map((item) => item.id)).toContain(maintenance.id);
      expect(new Set(systemItems.map((item) => item.kind))).toEqual(new Set([memoryMaintenanceKind]));
      expect(await ids({ class: 'all' })).toEqual(expect.arrayContaining([task.id, maintenance.id]));
      expect(await ids({ state: 'queued,running' })).toEqual([]);
      expect(await ids({ state: 'completed' })).toEqual([task.id]);
      await expect(client.call('work.list', { class: 'hidden' })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
      });
      await expect(client.call('work.list', { state: 'finished' })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
      });

      const home = started.runtime.config.home;
      const plain = await cli(home, 'work', 'list');
      expect(plain.stdout).toContain(task.id);
      expect(plain.stdout).not.toContain(maintenance.id);
      const all = await cli(home, 'work', 'list', '--all');
      expect(all.stdout).toContain(task.id);
      expect(all.stdout).toContain(maintenance.id);
      const system = await cli(home, 'work', 'list', '--system', '--json');
      const cliSystem = JSON.parse(system.stdout).items as Array<{ id: string; kind: string }>;
      expect(cliSystem.map((item) => item.id)).toContain(maintenance.id);
      expect(cliSystem.every((item) => item.kind === memoryMaintenanceKind)).toBe(true);
      expect((await cli(home, 'work', 'list', '--kind', memoryMaintenanceKind)).stdout).toContain(
        maintenance.id,
      );
      expect((await cli(home, 'work', 'list', '--all', '--system')).exitCode).toBe(2);

      // The next task's awareness digest lists the finished task but not the maintenance pass.
      const next = await client.call<{ id: string }>('work.submit', {
        kind: 'task',
        title: 'Review the changelog',
        description: 'Review it.',
      });
      await done(next.id);
      const request = model.requests.find((entry) =>
        entry.messages.some((message) => message.content.startsWith('Task: Review the changelog')),
      )!;
      const system0 = request.messages[0]!.content;
      expect(system0).toContain('Recently completed:');
      expect(system0).toContain('Write the changelog');
      expect(system0).not.toContain('memory maintenance');
      expect(system0).not.toContain(memoryMaintenanceKind);
    } finally {
      await client.close();
      await started.runtime.close();
    }
  }, 60_000);
});
