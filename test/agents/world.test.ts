import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type AgentRuntime,
  type CreateAgentRuntimeOptions,
  createAgentGatewayMethods,
  createAgentRuntime,
  decideOffline,
  parseModelDecision,
} from '../../src/agents/index.js';
import { type Bus, type BusEvent, createBus } from '../../src/bus/index.js';
import { ErrorCodes, silentLogger, UserInputError } from '../../src/util/index.js';
import { describeEachDatabase } from '../helpers/databases.js';

/** A seeded generator, so the offline rules choose the same way every run. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

describe('decision rules', () => {
  it('offline rules stay inside the world and move at most one step', () => {
    const random = seeded(7);
    let position = { x: 5, y: 5 };
    const actions = new Set<string>();
    for (let index = 0; index < 200; index++) {
      const decision = decideOffline({ position, maxStep: 30, random });
      actions.add(decision.action);
      if (decision.action === 'move') {
        expect(Math.hypot(decision.to.x - position.x, decision.to.y - position.y)).toBeLessThanOrEqual(31);
        expect(decision.to.x).toBeGreaterThanOrEqual(0);
        expect(decision.to.y).toBeGreaterThanOrEqual(0);
        position = decision.to;
      }
    }
    expect([...actions].sort()).toEqual(['move', 'speak', 'wait']);
  });

  it('a model reply becomes a decision; a far move is cut to one step, nonsense means wait', () => {
    expect(parseModelDecision('Sure! {"action":"move","x":500,"y":0}', { x: 0, y: 0 }, 50)).toEqual({
      action: 'move',
      to: { x: 50, y: 0 },
    });
    expect(parseModelDecision('{"action":"speak","content":"hi"}', { x: 0, y: 0 }, 50)).toEqual({
      action: 'speak',
      content: 'hi',
    });
    expect(parseModelDecision('I would rather not', { x: 0, y: 0 }, 50)).toEqual({ action: 'wait' });
    expect(parseModelDecision('{"action":"fly"}', { x: 0, y: 0 }, 50)).toEqual({ action: 'wait' });
  });
});

describeEachDatabase('agents in the world', (getDb) => {
  let bus: Bus;
  let events: BusEvent[];
  let runtime: AgentRuntime | undefined;

  beforeEach(() => {
    bus = createBus();
    events = [];
    bus.subscribe({ types: ['agent:*'] }, (event) => events.push(event));
  });
  afterEach(async () => {
    vi.useRealTimers();
    await runtime?.close();
    runtime = undefined;
  });

  const make = (extra: Partial<CreateAgentRuntimeOptions> = {}) =>
    createAgentRuntime({
      db: getDb(),
      bus,
      runTurn: async (agent, message) => `${agent.name} heard: ${message.content}`,
      logger: silentLogger,
      defaultModel: 'local/agentd-local',
      checkModel: (model) => {
        if (model === 'command/nope')
          throw new UserInputError({ code: ErrorCodes.unknownBackend, message: 'unknown CLI backend nope' });
      },
      ...extra,
    });

  it('honours seed 004 spawn fields in both shapes and refuses an unknown backend', async () => {
    runtime = make();
    const methods = createAgentGatewayMethods({ runtime });
    const flat = (await methods['agents.spawn']!.handler({
      type: 'agent_spawn_request',
      agent_config: {
        name: 'Scout',
        cli_backend: 'claude',
        initial_position: { x: 120, y: 80 },
        system_prompt: 'Be brief.',
        initial_context: 'The map is new.',
      },
    })) as any;
    expect(flat.agent).toMatchObject({
      name: 'Scout',
      model: 'command/claude',
      cliBackend: 'claude',
      position: { x: 120, y: 80 },
    });
    const camel = (await methods['agents.spawn']!.handler({
      id: 'gem',
      name: 'Gem',
      cliBackend: 'gemini',
      initialPosition: { x: 5, y: 6 },
      systemPrompt: 'Be kind.',
      initialContext: 'Day one.',
    })) as any;
    expect(camel.agent).toMatchObject({ id: 'gem', cliBackend: 'gemini', position: { x: 5, y: 6 } });
    const plain = (await methods['agents.spawn']!.handler({ id: 'plain', name: 'Plain' })) as any;
    expect(plain.agent.model).toBe('local/agentd-local');
    expect(plain.agent.cliBackend).toBeNull();
    expect(plain.agent.position).toEqual({ x: expect.any(Number), y: expect.any(Number) });

    await expect(
      methods['agents.spawn']!.handler({
        type: 'agent_spawn_request',
        agent_config: { name: 'Ghost', cli_backend: 'nope' },
      }),
    ).rejects.toMatchObject({ code: 'UNKNOWN_BACKEND' });
    expect(runtime.listStates().map((agent) => agent.id)).not.toContain('ghost');

    const listed = (await methods['agents.list']!.handler({})) as any;
    const gem = listed.agents.find((agent: any) => agent.id === 'gem');
    expect(gem).toMatchObject({ model: 'command/gemini', cliBackend: 'gemini', position: { x: 5, y: 6 } });
  });

  it('messages one agent, assigns it a task, and returns its conversation and state history', async () => {
    runtime = make();
    await runtime.spawn({ id: 'ada', name: 'Ada' });
    await runtime.spawn({ id: 'bob', name: 'Bob' });
    const methods = createAgentGatewayMethods({ runtime });
    expect(await methods['agents.message']!.handler({ agentId: 'ada', content: 'hello Ada' })).toEqual({
      agentId: 'ada',
      delivered: true,
    });
    await runtime.whenIdle('ada');
    const assigned = (await methods['agents.assign']!.handler({
      agentId: 'ada',
      task: 'count the trees',
    })) as any;
    expect(assigned.task).toMatchObject({ agentId: 'ada', taskName: 'count the trees', status: 'assigned' });
    await runtime.whenIdle('ada');
    const conversation = (await methods['agents.conversation']!.handler({ agentId: 'ada' })) as any;
    expect(conversation.messages.map((entry: any) => [entry.sender, entry.content])).toEqual([
      ['user', 'hello Ada'],
      ['ada', 'Ada heard: hello Ada'],
      ['system', 'count the trees'],
      ['ada', 'Ada heard: count the trees'],
    ]);
    const history = (await methods['agents.history']!.handler({ agentId: 'ada' })) as any;
    expect(history.states.map((entry: any) => entry.newState)).toEqual([
      'listening',
      'thinking',
      'speaking',
      'idle',
      'listening',
      'thinking',
      'speaking',
      'idle',
    ]);
    expect(history.tasks).toEqual([
      expect.objectContaining({ taskName: 'count the trees', status: 'completed' }),
    ]);
    // Only Ada was spoken to.
    expect((await runtime.conversation('bob')).length).toBe(0);
    await expect(
      methods['agents.message']!.handler({ agentId: 'nobody', content: 'x' }),
    ).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    await expect(methods['agents.history']!.handler({ agentId: 'nobody' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
  });

  it('runs the decision loop on its interval without a model, and persists where agents moved', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    runtime = make({ random: seeded(3) });
    await runtime.spawn({
      id: 'walker',
      name: 'Walker',
      position: { x: 500, y: 300 },
      decisionLoop: { intervalMs: 1_000, maxStep: 40 },
    });
    await runtime.spawn({ id: 'still', name: 'Still', position: { x: 10, y: 10 } });
    expect(events.filter((event) => event.type === 'agent:decided')).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(999);
    expect(events.filter((event) => event.type === 'agent:decided')).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(9_001);
    const decided = events.filter((event) => event.type === 'agent:decided');
    expect(decided).toHaveLength(10);
    expect(decided.every((event) => event.agentId === 'walker')).toBe(true);
    const moves = events.filter((event) => event.type === 'agent:moved').map((event) => event.data as any);
    expect(moves.length).toBe(decided.filter((event) => (event.data as any).action === 'move').length);
    expect(moves.length).toBeGreaterThan(0);
    const last = moves.at(-1)!.to;
    expect(runtime.getState('walker').position).toEqual(last);
    expect(runtime.getState('walker').autonomy).toEqual({
      intervalMs: 1_000,
      useModel: false,
      modelCallsLeft: 20,
    });
    expect(runtime.getState('still').position).toEqual({ x: 10, y: 10 });
    await runtime.whenIdle('walker');

    // After a restart the agent stands where it last moved to.
    await runtime.close();
    runtime = make();
    await runtime.start();
    expect(runtime.getState('walker').position).toEqual(last);
  });

  it('uses a real model only when configured, within its budget, then falls back to the rules', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const prompts: string[] = [];
    runtime = make({
      random: seeded(11),
      decideWithModel: async (_agent, prompt) => {
        prompts.push(prompt);
        return '{"action":"speak","content":"Hello, world."}';
      },
    });
    await runtime.spawn({ id: 'offline', name: 'Offline', decisionLoop: { intervalMs: 500 } });
    await runtime.spawn({
      id: 'thinker',
      name: 'Thinker',
      position: { x: 100, y: 100 },
      decisionLoop: { intervalMs: 500, useModel: true, maxModelCalls: 2 },
    });
    await vi.advanceTimersByTimeAsync(2_500);
    // Only the configured agent asked the model, and only twice.
    expect(prompts).toHaveLength(2);
    expect(prompts[0]).toContain('Thinker');
    expect(runtime.getState('thinker').autonomy?.modelCallsLeft).toBe(0);
    const spoken = events
      .filter((event) => event.type === 'agent:spoke' && event.agentId === 'thinker')
      .map((event) => (event.data as any).content);
    expect(spoken.slice(0, 2)).toEqual(['Hello, world.', 'Hello, world.']);
    const thinkerDecisions = events.filter(
      (event) => event.type === 'agent:decided' && event.agentId === 'thinker',
    );
    expect(thinkerDecisions).toHaveLength(5);
    // Speaking on its own goes through the state machine like a turn.
    const states = events
      .filter((event) => event.type === 'agent:state' && event.agentId === 'thinker')
      .map((event) => (event.data as any).to);
    expect(states.slice(0, 3)).toEqual(['thinking', 'speaking', 'idle']);
  });

  it('skips decisions while the agent is busy with its mailbox', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    runtime = make({
      random: seeded(5),
      runTurn: async () => {
        await gate;
        return 'done';
      },
    });
    await runtime.spawn({ id: 'busy', name: 'Busy', decisionLoop: { intervalMs: 200 } });
    await runtime.send('busy', { from: 'user', content: 'a long job' });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(events.filter((event) => event.type === 'agent:decided')).toHaveLength(0);
    release();
    await runtime.whenIdle('busy');
    await vi.advanceTimersByTimeAsync(200);
    expect(events.filter((event) => event.type === 'agent:decided')).toHaveLength(1);
  });
});
