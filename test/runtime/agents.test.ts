import { describe, expect, it } from 'vitest';
import { collectRun, startRuntime } from './helpers.js';

describe('agents at work through the gateway (local model)', () => {
  it('turns /goal into a plan, runs the tasks and posts a synthesis, with events in order', async () => {
    const started = await startRuntime();
    const client = await started.connect();
    try {
      const events: Array<{ event: string; payload: any }> = [];
      client.onEvent((event, payload) => {
        if (event.startsWith('agent.')) events.push({ event, payload });
      });
      const synthesis = new Promise<any>((resolve) => {
        client.onEvent((event, payload) => {
          if (event === 'chat' && payload.state === 'final' && String(payload.runId).startsWith('announce'))
            resolve(payload);
        });
      });
      const done = collectRun(client, 'goal-1');
      await client.call('chat.send', {
        sessionKey: 'agent:main:main',
        message: '/goal Collect the open questions. Then draft an answer for each. And list the risks.',
        idempotencyKey: 'goal-1',
      });
      const reply = (await done).at(-1)!.payload;
      expect(reply.state).toBe('final');
      const replyText = reply.message.content[0].text as string;
      expect(replyText).toMatch(/1\. .+\n2\. .+\n3\. /);

      // Offline, nothing pretends to be done: the plan, each task and the synthesis say so, with the how-to.
      expect(replyText).toContain('The offline model cannot carry them out');
      expect(replyText).toContain('OPENAI_API_KEY');
      const posted = await synthesis;
      const synthesisText = posted.message.content[0].text as string;
      expect(synthesisText).toContain('[local model]');
      expect(synthesisText).not.toContain('✓');
      expect(synthesisText).not.toContain('All tasks completed');
      expect(synthesisText).toMatch(/^○ /m);
      expect(synthesisText).toContain('3 of 3 task(s) were only acknowledged by the offline model');
      expect(synthesisText).toContain('none was done for real');
      for (const variable of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'AGENTD_MODEL'])
        expect(synthesisText).toContain(variable);

      const plan = events.find((entry) => entry.event === 'agent.plan')!;
      expect(plan.payload.tasks).toHaveLength(3);
      const phases = events
        .filter((entry) => entry.event === 'agent.progress')
        .map((entry) => entry.payload.phase);
      expect(phases.indexOf('planner-received')).toBeLessThan(phases.indexOf('planner-ready'));
      expect(phases.filter((phase) => phase === 'worker-completed')).toHaveLength(3);
      expect(phases.at(-1)).toBe('synthesis');
      // Each task reports queued → … → completed, in that order.
      for (const task of plan.payload.tasks) {
        const states = events
          .filter((entry) => entry.event === 'agent.status' && entry.payload.workItemId === task.workItemId)
          .map((entry) => entry.payload.state);
        expect(states.at(-1)).toBe('completed');
      }
      // The plan was written to the session's memory as a system entry; the synthesis is in the transcript.
      const history = await started.runtime.memory.history('agent:main:main', { limit: 20 });
      expect(history.at(-1)!.content).toBe(posted.message.content[0].text);
      const items = await client.call<{ items: Array<{ state: string }> }>('work.list', {
        sessionKey: 'agent:main:main',
      });
      expect(items.items.filter((item) => item.state === 'completed')).toHaveLength(3);
      for (const item of items.items as Array<{ outcome?: { data?: { summary?: string } } }>)
        expect(item.outcome?.data?.summary).toMatch(
          /^\[local model\] Not done: the offline model cannot carry out/,
        );
    } finally {
      await client.close();
      await started.runtime.close();
    }
  });

  it('spawns, lists, broadcasts to and terminates agents, streaming their state', async () => {
    const started = await startRuntime();
    const client = await started.connect();
    try {
      const updates: any[] = [];
      client.onEvent((event, payload) => {
        if (event === 'agent.state_update') updates.push(payload);
      });
      const spawned = await client.call<{ agentId: string }>('agents.spawn', {
        id: 'scout',
        name: 'Scout',
        role: 'looks around',
      });
      expect(spawned.agentId).toBe('scout');
      // seed 004's spawn request shape is accepted too.
      const critic = await client.call<{ agentId: string }>('agents.spawn', {
        type: 'agent_spawn_request',
        agent_config: { name: 'Critic', role: 'reviews', system_prompt: 'Be terse.' },
      });
      const list = await client.call<{
        defaultId: string;
        mainKey: string;
        scope: string;
        agents: Array<{ id: string; name: string; kind: string; model: string }>;
      }>('agents.list', {});
      // OpenClaw's AgentsListResult fields, which its TUI reads to pick the agent and name it.
      expect(list).toMatchObject({ defaultId: 'main', mainKey: 'main', scope: 'per-sender' });
      expect(list.agents.every((agent) => agent.kind === 'agent' && agent.model.length > 0)).toBe(true);
      expect(list.agents.map((agent) => agent.name)).toEqual(expect.arrayContaining(['Scout', 'Critic']));
      expect(list.agents.map((agent) => agent.id)).toContain(critic.agentId);
      const broadcast = await client.call<{ delivered: number }>('agent.broadcast', {
        content: 'status report, please',
      });
      expect(broadcast.delivered).toBeGreaterThanOrEqual(2);
      await started.runtime.work.agents!.whenIdle('scout');
      const states = () =>
        updates.filter((update) => update.agent_id === 'scout').map((update) => update.state);
      // The last update travels over the socket after the agent went idle.
      await expect.poll(() => states().at(-1), { timeout: 5_000 }).toBe('idle');
      expect(states()).toEqual(['listening', 'thinking', 'speaking', 'idle']);
      const terminated = await client.call<{ terminated: boolean }>('agents.terminate', { agentId: 'scout' });
      expect(terminated.terminated).toBe(true);
      await expect(client.call('agents.state', { agentId: 'scout' })).rejects.toMatchObject({
        code: expect.any(String),
      });
      await expect(client.call('agents.spawn', { name: '' })).rejects.toMatchObject({
        code: 'INVALID_REQUEST',
      });
    } finally {
      await client.close();
      await started.runtime.close();
    }
  });
});
