import { describe, expect, it, vi } from 'vitest';
import { agentRetentionConfigSchema } from '../../src/agents/index.js';
import { loadConfig } from '../../src/config/index.js';
import { createStore, type SqlValue, sqlValueRows } from '../../src/store/index.js';
import { homeWithConfig, useRuntimeHomes } from '../helpers/retention.js';

/**
 * A home whose agent `scout` has `count` state transitions, as many conversation lines and as many tasks, the
 * first of them still assigned.
 */
async function homeWithRecords(yaml: string, count: number): Promise<string> {
  const home = homeWithConfig('agentd-agent-retention-', yaml);
  const store = await createStore({ stateDir: home });
  const history: SqlValue[] = [];
  const lines: SqlValue[] = [];
  const tasks: SqlValue[] = [];
  for (let index = 0; index < count; index++) {
    history.push('scout', 'idle', 'thinking', `step ${index}`, 1_000 + index);
    lines.push('scout', 1_000 + index, 'scout', `line ${index}`, null);
    tasks.push(
      `task-${index}`,
      'scout',
      `task ${index}`,
      index === 0 ? 'assigned' : 'completed',
      1_000 + index,
    );
  }
  await store.db.run(
    `INSERT INTO agent_state_history (agent_id, old_state, new_state, reason, timestamp) VALUES ${sqlValueRows(count, 5)}`,
    history,
  );
  await store.db.run(
    `INSERT INTO agent_conversations (agent_id, timestamp, sender, content, recipient) VALUES ${sqlValueRows(count, 5)}`,
    lines,
  );
  await store.db.run(
    `INSERT INTO agent_tasks (id, agent_id, task_name, status, created_at) VALUES ${sqlValueRows(count, 5)}`,
    tasks,
  );
  await store.close();
  return home;
}

describe('the agent_runtime section of agentd.yaml', () => {
  const { homes, openIn } = useRuntimeHomes();

  it('keeps 10,000 rows of each per agent by default, 0 for ever, and refuses negative or unknown settings', () => {
    expect(agentRetentionConfigSchema.parse({})).toEqual({
      retainStateHistoryRows: 10_000,
      retainConversationRows: 10_000,
      retainTaskRows: 10_000,
    });
    expect(agentRetentionConfigSchema.parse({ retainConversationRows: 0, retainTaskRows: 0 })).toEqual({
      retainStateHistoryRows: 10_000,
      retainConversationRows: 0,
      retainTaskRows: 0,
    });
    expect(agentRetentionConfigSchema.safeParse({ retainTaskRows: -1 }).success).toBe(false);
    expect(agentRetentionConfigSchema.safeParse({ retainStateHistoryRows: -1 }).success).toBe(false);
    expect(agentRetentionConfigSchema.safeParse({ retainStateHistoryRows: 1.5 }).success).toBe(false);
    expect(agentRetentionConfigSchema.safeParse({ retainHistoryDays: 7 }).success).toBe(false);
  });

  it("limits the runtime's agents to the rows it names", async () => {
    const home = await homeWithRecords(
      'agent_runtime:\n  retainStateHistoryRows: 2\n  retainConversationRows: 3\n  retainTaskRows: 2\n',
      6,
    );
    homes.push(home);
    const env = { AGENTD_HOME: home };
    const config = loadConfig({ cwd: home, env });
    expect(agentRetentionConfigSchema.parse(config.sections.agent_runtime)).toEqual({
      retainStateHistoryRows: 2,
      retainConversationRows: 3,
      retainTaskRows: 2,
    });
    const runtime = await openIn(home);
    await runtime.startBackground();
    const agents = runtime.work.agents!;
    await vi.waitFor(async () => {
      expect((await agents.history('scout')).map((entry) => entry.reason)).toEqual(['step 4', 'step 5']);
      expect((await agents.conversation('scout')).map((entry) => entry.content)).toEqual([
        'line 3',
        'line 4',
        'line 5',
      ]);
      // The first task is still assigned: it stays beside the two newest.
      expect((await agents.tasks('scout')).map((task) => task.id)).toEqual(['task-0', 'task-4', 'task-5']);
    });
  });
});
