import { describe, expect, it } from 'vitest';
import { connectSpiderweb, startRuntime } from './helpers.js';

describe('the agent world over both protocols', () => {
  it('spawns with cli_backend and position, messages, assigns and reads history; refuses unknown backends', async () => {
    const started = await startRuntime();
    const client = await started.connect();
    const base = started.url.replace(/\/$/, '');
    const flat = await connectSpiderweb(
      `${base}/v1/agents/main/stream?session=world&token=${started.runtime.state.token}`,
    );
    try {
      await flat.next((message) => message.type === 'session.ack');
      flat.send({
        type: 'agent_spawn_request',
        id: 's1',
        agent_config: {
          name: 'Claude Scout',
          role: 'scouts',
          cli_backend: 'claude',
          initial_position: { x: 42, y: 24 },
          system_prompt: 'Be brief.',
          initial_context: 'The map is new.',
        },
      });
      const spawned = await flat.next((message) => message.type === 'agent_spawn_response');
      expect(spawned).toMatchObject({
        request: 's1',
        agent_id: expect.any(String),
        agent: {
          name: 'Claude Scout',
          cliBackend: 'claude',
          model: 'command/claude',
          position: { x: 42, y: 24 },
        },
      });
      const state = await client.call<{ agent: any }>('agents.state', { agentId: spawned.agent_id });
      expect(state.agent).toMatchObject({ cliBackend: 'claude', position: { x: 42, y: 24 } });

      flat.send({
        type: 'agent_spawn_request',
        id: 's2',
        agent_config: { name: 'Ghost', cli_backend: 'cobol' },
      });
      expect(await flat.next((message) => message.request === 's2')).toMatchObject({
        type: 'error',
        code: 'unknown_backend',
        message: expect.stringContaining('cobol'),
      });
      await expect(client.call('agents.spawn', { name: 'Ghost', cliBackend: 'cobol' })).rejects.toMatchObject(
        {
          code: 'UNKNOWN_BACKEND',
        },
      );

      // A local-model agent to talk to, over OpenClaw…
      await client.call('agents.spawn', { id: 'ada', name: 'Ada', initialPosition: { x: 1, y: 2 } });
      const moved = new Promise<any>((resolve) =>
        client.onEvent((event, payload) => {
          if (event === 'agent.moved' && payload.agent_id === 'ada') resolve(payload);
        }),
      );
      await client.call('agents.move', { agentId: 'ada', x: 10, y: 20 });
      expect(await moved).toMatchObject({
        type: 'agent_moved',
        position: { x: 10, y: 20 },
        from: { x: 1, y: 2 },
      });
      await client.call('agents.message', { agentId: 'ada', content: 'Hello Ada' });
      await started.runtime.work.agents!.whenIdle('ada');
      const assigned = await client.call<{ task: { id: string } }>('agents.assign', {
        agentId: 'ada',
        task: 'Count the boats',
      });
      await started.runtime.work.agents!.whenIdle('ada');
      // …and over Spiderweb.
      flat.send({ type: 'agent_message', id: 'm1', agent_id: 'ada', content: 'Hi from the flat protocol' });
      expect(await flat.next((message) => message.request === 'm1')).toMatchObject({
        type: 'agent_message',
        agent_id: 'ada',
        delivered: true,
      });
      await started.runtime.work.agents!.whenIdle('ada');
      flat.send({ type: 'agent_task_assign', id: 't1', agent_id: 'ada', task_name: 'Paint the fence' });
      expect(await flat.next((message) => message.request === 't1')).toMatchObject({
        type: 'agent_task_assign',
        task: { taskName: 'Paint the fence', status: 'assigned' },
      });
      await started.runtime.work.agents!.whenIdle('ada');

      flat.send({ type: 'agent_conversation_request', id: 'c1', agent_id: 'ada' });
      const conversation = await flat.next((message) => message.request === 'c1');
      expect(conversation.type).toBe('agent_conversation');
      expect(
        conversation.messages
          .filter((entry: any) => entry.sender !== 'ada')
          .map((entry: any) => entry.content),
      ).toEqual(['Hello Ada', 'Count the boats', 'Hi from the flat protocol', 'Paint the fence']);
      expect(conversation.messages.filter((entry: any) => entry.sender === 'ada')).toHaveLength(4);
      const history = await client.call<{ states: any[]; tasks: any[] }>('agents.history', {
        agentId: 'ada',
      });
      expect(history.tasks.map((task) => [task.taskName, task.status])).toEqual([
        ['Count the boats', 'completed'],
        ['Paint the fence', 'completed'],
      ]);
      expect(history.tasks[0].id).toBe(assigned.task.id);
      flat.send({ type: 'agent_history_request', id: 'h1', agent_id: 'ada' });
      const flatHistory = await flat.next((message) => message.request === 'h1');
      expect(flatHistory.states.filter((entry: any) => entry.newState === 'speaking')).toHaveLength(4);
    } finally {
      flat.socket.close();
      await client.close();
      await started.runtime.close();
    }
  });
});
