import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import {
  checkMcpServers,
  openStandaloneSkills,
  openStandaloneWork,
  resolveStandaloneModel,
} from '../../src/runtime.js';
import { tempHome } from './helpers.js';

function configIn(home: string, model?: string) {
  return loadConfig({ cwd: home, env: { AGENTD_HOME: home }, overrides: model ? { model } : {} });
}

describe('standalone factories for the CLI', () => {
  it('opens the state directory’s queue and ledger; what is submitted is there after a reopen', async () => {
    const home = tempHome('agentd-standalone-');
    const first = await openStandaloneWork(configIn(home));
    const item = await first.queue.submit({ kind: 'task', title: 'write the notes' });
    await first.close();
    const second = await openStandaloneWork(configIn(home));
    expect((await second.queue.get(item.id))?.title).toBe('write the notes');
    await expect(second.ledger.read(item.id, {})).resolves.toEqual([]);
    await second.close();
  });

  it('opens the workspace skill library, seeded as a runtime seeds it, with the configured staleness', async () => {
    const skills = await openStandaloneSkills(configIn(tempHome('agentd-standalone-')));
    expect(skills.staleAfterDays).toBeGreaterThan(0);
    expect((await skills.library.list()).map((skill) => skill.name)).toContain('code-review');
    await skills.close();
  });

  it('resolves the named model, else the configured one', () => {
    const config = configIn(tempHome('agentd-standalone-'), 'local/agentd-local');
    expect(resolveStandaloneModel(config).provider).toBe('local');
    expect(resolveStandaloneModel(config, 'local/agentd-local').modelId).toBe('agentd-local');
  });

  it('reports no MCP servers when none are configured', async () => {
    await expect(checkMcpServers(configIn(tempHome('agentd-standalone-')))).resolves.toEqual([]);
  });
});
