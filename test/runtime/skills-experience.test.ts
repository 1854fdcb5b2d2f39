import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { describe, expect, it, vi } from 'vitest';
import { registerSkillCommands } from '../../src/cli/commands/skills.js';
import { createLedger } from '../../src/ledger/index.js';
import type { LanguageModel, ModelRequest, ModelStreamEvent } from '../../src/model/index.js';
import { createSkillExperience, createSkillLibrary } from '../../src/skills/index.js';
import { createStore } from '../../src/store/index.js';
import { startRuntime, tempHome } from './helpers.js';

/** Each work item's run records the finding its description carries, then answers. */
function findingModel(): LanguageModel & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    specificationVersion: 'v1',
    provider: 'scripted',
    modelId: 'findings',
    contextWindowTokens: 100_000,
    requests,
    async *doStream(request): AsyncIterable<ModelStreamEvent> {
      requests.push(request);
      const task = request.messages.find((message) => message.role === 'user')!.content;
      const finding = /Finding: (.+)/.exec(task)?.[1];
      const recorded = request.messages.some((message) => message.role === 'tool');
      if (finding && !recorded) {
        yield {
          type: 'tool-call',
          toolCall: {
            id: 'c1',
            name: 'ledger_append',
            arguments: { entry_type: 'finding', content: finding },
          },
        };
        yield { type: 'finish', stopReason: 'tool_calls' };
        return;
      }
      yield { type: 'text-delta', text: 'Done.' };
      yield { type: 'finish', stopReason: 'end_turn' };
    },
  };
}

async function cli(home: string, ...args: string[]): Promise<{ stdout: string; exitCode: number }> {
  let stdout = '';
  let exitCode = 0;
  const program = new Command().exitOverride();
  registerSkillCommands(program, {
    openSkills: async () => {
      const store = await createStore({ stateDir: home });
      const ledger = createLedger({ db: store.db });
      const library = createSkillLibrary({ dirs: [`${home}/workspace/skills`], db: store.db, ledger });
      return {
        library,
        experience: createSkillExperience({ db: store.db, ledger, library }),
        staleAfterDays: 30,
        close: () => store.close(),
      };
    },
    io: { stdout: (text) => (stdout += text), stderr: (text) => (stdout += text) },
    setExitCode: (code) => (exitCode = code),
  });
  await program.parseAsync(['node', 'agentd', ...args]);
  return { stdout, exitCode };
}

describe('skills from experience, through the gateway and the CLI', () => {
  it('a finding that recurs across three work items becomes a draft; approved, it is a skill with its provenance', async () => {
    const model = findingModel();
    // Scan after every completion at once (the default waits up to 10 s between scans).
    const home = tempHome();
    writeFileSync(join(home, 'agentd.yaml'), 'skills:\n  experience:\n    scanIntervalMs: 0\n');
    const started = await startRuntime({ model, home });
    const client = await started.connect();
    const runTask = async (title: string, finding: string) => {
      const { id } = await client.call<{ id: string }>('work.submit', {
        kind: 'task',
        title,
        description: `Finding: ${finding}`,
      });
      await vi.waitFor(
        async () => {
          const got = await client.call<{ item: { state: string } }>('work.get', { id });
          expect(got.item.state).toBe('completed');
        },
        { timeout: 15_000, interval: 50 },
      );
      await started.runtime.skillExperience.idle();
      return id;
    };
    try {
      const proposedEvents: any[] = [];
      started.runtime.bus.on('skill:proposed', (event) => proposedEvents.push(event.data));
      const gatewayEvents: any[] = [];
      client.onEvent((event, payload) => {
        if (event === 'skill.proposed') gatewayEvents.push(payload);
      });
      const first = await runTask('Sync orders', 'The vendor API rate limit is 10 requests per second.');
      await runTask('Fix the logo', 'The logo file is missing from the assets folder.');
      const second = await runTask(
        'Sync invoices',
        'Vendor API rate limit: 10 requests per second, then 429.',
      );
      // Two items share the pattern: below the default threshold of three.
      expect((await client.call<{ proposals: unknown[] }>('skills.proposals', {})).proposals).toEqual([]);
      const third = await runTask(
        'Sync refunds',
        'We hit the vendor API rate limit (10 requests per second).',
      );

      const { proposals } = await client.call<{ proposals: any[] }>('skills.proposals', { status: 'draft' });
      expect(proposals).toHaveLength(1);
      const [proposal] = proposals;
      expect(proposal.mode).toBe('draft');
      expect(proposal.skillName).toMatch(/^[a-z0-9-]+$/);
      expect(proposal.sources.map((source: any) => source.workItemId)).toEqual([first, second, third]);
      expect(proposal.content).toContain('The same finding came up in 3 separate work items');
      expect(proposedEvents).toEqual([
        expect.objectContaining({ proposalId: proposal.id, mode: 'draft', sources: 3, workItems: 3 }),
      ]);
      await vi.waitFor(() => expect(gatewayEvents).toHaveLength(1), { timeout: 5_000 });
      expect(gatewayEvents[0]).toMatchObject({ proposalId: proposal.id, name: proposal.skillName });
      // A scan finds nothing new: each pattern is proposed once.
      expect((await client.call<{ proposals: unknown[] }>('skills.scan', {})).proposals).toEqual([]);

      // The CLI sees the proposal; then the gateway approves it.
      expect(started.runtime.config.home).toBe(home);
      expect((await cli(home, 'skills', 'proposals')).stdout).toContain(`${proposal.id}  draft`);
      const approved = await client.call<{ skill: any; proposal: any }>('skills.approve', {
        id: proposal.id,
      });
      expect(approved.proposal.status).toBe('approved');
      expect(approved.skill).toMatchObject({ name: proposal.skillName, version: 1, createdBy: 'agent' });
      expect(approved.skill.createdFrom).toBe(`pattern:${proposal.patternKey}`);
      await expect(client.call('skills.approve', { id: proposal.id })).rejects.toMatchObject({
        code: 'CONFLICT',
      });
      await expect(client.call('skills.approve', { id: 'skp_missing' })).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });

      const listed = await client.call<{ skills: any[] }>('skills.list', {});
      expect(listed.skills.map((skill) => skill.name)).toContain(proposal.skillName);
      const { provenance } = await client.call<{ provenance: any[] }>('skills.provenance', {
        name: proposal.skillName,
      });
      const entries = provenance.filter((record) => record.sourceType === 'ledger_entry');
      expect(entries.map((record) => record.workItemId)).toEqual([first, second, third]);
      expect(entries[0].contentSnippet).toBe('The vendor API rate limit is 10 requests per second.');
      expect(provenance.filter((record) => record.sourceType === 'work_item')).toHaveLength(3);
      const shown = await client.call<{ stale: boolean }>('skills.show', { name: proposal.skillName });
      expect(shown.stale).toBe(false);
      expect(
        (await client.call<{ skills: any[] }>('skills.stale', {})).skills.map((s) => s.name),
      ).not.toContain(proposal.skillName);
      await expect(client.call('skills.show', { name: 'no-such-skill' })).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });

      // The CLI shows the skill, its provenance and staleness.
      expect((await cli(home, 'skills', 'list')).stdout).toContain(proposal.skillName);
      const show = await cli(home, 'skills', 'show', proposal.skillName);
      expect(show.stdout).toContain('provenance: 6 record(s) from 3 work item(s)');
      const provenanceText = (await cli(home, 'skills', 'provenance', proposal.skillName)).stdout;
      expect(provenanceText).toContain(`ledger ${third}#1: We hit the vendor API rate limit`);
      expect((await cli(home, 'skills', 'stale', '--json')).stdout).toContain('"olderThanDays": 30');
      expect((await cli(home, 'skills', 'stale', '--days', '0')).exitCode).toBe(2);
      expect((await cli(home, 'skills', 'show', 'no-such-skill')).exitCode).toBe(2);

      // The next work item's awareness digest says which skills were updated.
      await runTask('Sync payouts', 'Payouts settle on Fridays.');
      const request = model.requests.find((entry) =>
        entry.messages.some((message) => message.content.startsWith('Task: Sync payouts')),
      )!;
      const system = request.messages[0]!.content;
      expect(system).toContain('Skills updated (activate_skill to use one):');
      expect(system).toContain(`- ${proposal.skillName} v1 (`);
      expect(system).toContain('from 3 work items');
    } finally {
      await client.close();
      await started.runtime.close();
    }
  }, 90_000);
});
