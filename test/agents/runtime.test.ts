import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type AgentInboxMessage,
  type AgentInfo,
  type AgentRuntime,
  canAgentTransition,
  createAgentGatewayMethods,
  createAgentRuntime,
  createPlanner,
  createSendMessageTool,
  createWorkerPool,
  defaultPosition,
  toAgentSpeech,
  toAgentStateUpdate,
} from '../../src/agents/index.js';
import { type Bus, type BusEvent, createBus } from '../../src/bus/index.js';
import { createLocalModel } from '../../src/model/index.js';
import type { SqlDatabase } from '../../src/store/index.js';
import { createSequentialIdGenerator, silentLogger } from '../../src/util/index.js';
import { createWorkQueue } from '../../src/work/index.js';
import { describeEachDatabase, openTestDatabase } from '../helpers/databases.js';
import { createFaultyDatabase } from '../helpers/faulty-database.js';
import { deferred, nextEvent } from './helpers.js';

type RunTurn = (agent: AgentInfo, message: AgentInboxMessage, signal: AbortSignal) => Promise<string>;

const echo: RunTurn = async (agent, message) => `${agent.name} heard: ${message.content}`;
/** A turn that never ends, as one a crash or a restart cuts short. */
const hang: RunTurn = () => new Promise<string>(() => undefined);
/** `echo`, noting each message's content in `seen`. */
const echoNoting =
  (seen: string[]): RunTurn =>
  async (agent, message, signal) => {
    seen.push(message.content);
    return echo(agent, message, signal);
  };
/** `echo` once `gate` opens. */
const echoAfter =
  (gate: Promise<unknown>): RunTurn =>
  async (agent, message) => {
    await gate;
    return echo(agent, message, new AbortController().signal);
  };

describe('agent state machine', () => {
  it('allows seed 004 transitions and refuses speaking → thinking and idle → speaking', () => {
    expect(canAgentTransition('idle', 'listening')).toBe(true);
    expect(canAgentTransition('listening', 'thinking')).toBe(true);
    expect(canAgentTransition('listening', 'idle')).toBe(true);
    expect(canAgentTransition('thinking', 'speaking')).toBe(true);
    expect(canAgentTransition('speaking', 'idle')).toBe(true);
    expect(canAgentTransition('error', 'idle')).toBe(true);
    expect(canAgentTransition('speaking', 'error')).toBe(true);
    expect(canAgentTransition('speaking', 'thinking')).toBe(false);
    expect(canAgentTransition('idle', 'speaking')).toBe(false);
    expect(canAgentTransition('error', 'thinking')).toBe(false);
  });
});

describeEachDatabase('agent runtime', (getDb) => {
  let bus: Bus;
  let events: BusEvent[];
  let runtime: AgentRuntime | undefined;

  beforeEach(() => {
    bus = createBus();
    events = [];
    bus.subscribe({ types: ['agent:*'] }, (event) => events.push(event));
  });
  afterEach(async () => {
    await runtime?.close();
    runtime = undefined;
  });

  const make = (runTurn: RunTurn = echo, extra: Record<string, number> = {}) =>
    createAgentRuntime({ db: getDb(), bus, runTurn, logger: silentLogger, ...extra });

  /** Spawns an agent on `target` and sends it a first message; resolves once that message's turn has begun. */
  const spawnBusy = async (target: AgentRuntime, agent: { id: string; name: string }, content: string) => {
    const thinking = nextEvent(
      bus,
      'agent:state',
      (data) => data.agentId === agent.id && data.to === 'thinking',
    );
    await target.spawn(agent);
    await target.send(agent.id, { from: 'user', content });
    await thinking;
  };

  it('spawns, lists, reports state and terminates over the gateway methods', async () => {
    runtime = make();
    const methods = createAgentGatewayMethods({ runtime });
    const spawned = (await methods['agents.spawn']!.handler({
      type: 'agent_spawn_request',
      agent_config: {
        name: 'Scout',
        role: 'researcher',
        cli_backend: 'claude',
        initial_position: { x: 3, y: 4 },
      },
    })) as any;
    expect(spawned.agent).toMatchObject({
      name: 'Scout',
      role: 'researcher',
      state: 'idle',
      position: { x: 3, y: 4 },
    });
    await methods['agents.spawn']!.handler({ id: 'writer', name: 'Writer' });
    const listed = (await methods['agents.list']!.handler({})) as any;
    expect(listed.agents.map((agent: any) => agent.name).sort()).toEqual(['Scout', 'Writer']);
    const state = (await methods['agents.state']!.handler({ agentId: 'writer' })) as any;
    expect(toAgentStateUpdate(state.agent)).toEqual({
      type: 'agent_state_update',
      agent_id: 'writer',
      state: 'idle',
      // Spawned without a position, an agent gets a stable one derived from its id.
      position: defaultPosition('writer'),
      current_task: null,
    });
    await expect(methods['agents.spawn']!.handler({ id: 'writer', name: 'Again' })).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    await expect(methods['agents.spawn']!.handler({ name: '' })).rejects.toMatchObject({
      code: 'INVALID_REQUEST',
    });
    // A sender's name is written to every mailbox a broadcast reaches: bounded, as a direct message's is.
    const longName = 'x'.repeat(129);
    await expect(
      methods['agent.broadcast']!.handler({ content: 'hi', from: longName }),
    ).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    await expect(
      methods['agents.message']!.handler({ agentId: 'writer', content: 'hi', from: longName }),
    ).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    expect(await getDb().all('SELECT seq FROM agent_mailbox')).toEqual([]);
    expect(await methods['agents.terminate']!.handler({ agentId: 'writer' })).toMatchObject({
      terminated: true,
      forced: false,
    });
    await expect(methods['agents.state']!.handler({ agentId: 'writer' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    expect(runtime.listStates()).toHaveLength(1);
  });

  it('broadcasts to every agent; each goes idle → listening → thinking → speaking → idle, published and persisted', async () => {
    runtime = make();
    for (const id of ['a', 'b', 'c']) await runtime.spawn({ id, name: id.toUpperCase() });
    const methods = createAgentGatewayMethods({ runtime });
    expect(await methods['agent.broadcast']!.handler({ content: 'stand-up in five' })).toEqual({
      delivered: 3,
      dropped: 0,
    });
    for (const id of ['a', 'b', 'c']) await runtime.whenIdle(id);
    const spoke = events.filter((event) => event.type === 'agent:spoke').map((event) => event.data as any);
    expect(spoke.map((data) => data.content).sort()).toEqual([
      'A heard: stand-up in five',
      'B heard: stand-up in five',
      'C heard: stand-up in five',
    ]);
    expect(toAgentSpeech(spoke[0])).toMatchObject({ type: 'agent_speech', recipients: [] });
    const published = events
      .filter((event) => event.type === 'agent:state' && (event.data as any).agentId === 'b')
      .map((event) => (event.data as any).to);
    expect(published).toEqual(['listening', 'thinking', 'speaking', 'idle']);
    const history = await runtime.history('b');
    expect(history.map((entry) => `${entry.oldState}→${entry.newState}`)).toEqual([
      'idle→listening',
      'listening→thinking',
      'thinking→speaking',
      'speaking→idle',
    ]);
    const conversation = await runtime.conversation('b');
    expect(conversation.map((entry) => [entry.sender, entry.recipient, entry.content])).toEqual([
      ['system', 'b', 'stand-up in five'],
      ['b', null, 'B heard: stand-up in five'],
    ]);
  });

  it('a refused transition is an event and changes nothing', async () => {
    runtime = make();
    await runtime.spawn({ id: 'a', name: 'A' });
    expect(runtime.requestTransition('a', 'speaking', 'first chunk')).toBe(false);
    expect(runtime.getState('a').state).toBe('idle');
    const rejected = events.find((event) => event.type === 'agent:transition-rejected');
    expect(rejected?.data).toMatchObject({ agentId: 'a', from: 'idle', to: 'speaking' });
    expect(runtime.requestTransition('a', 'thinking', 'prompt sent')).toBe(true);
    expect(runtime.requestTransition('a', 'speaking')).toBe(true);
    expect(runtime.requestTransition('a', 'thinking')).toBe(false);
    expect(runtime.requestTransition('a', 'idle')).toBe(true);
  });

  it('agents message each other with send_message; conversations are persisted', async () => {
    let sendMessage: ReturnType<typeof createSendMessageTool> | undefined;
    const runTurn: RunTurn = async (agent, message, signal) => {
      if (agent.id === 'alice' && message.kind === 'task') {
        await sendMessage!.execute(
          { to: 'bob', content: 'Bob, can you check the numbers?' },
          {
            runId: 'r',
            agentId: 'alice',
            toolCallId: 't',
            workspaceDir: '/tmp',
            signal,
            bus,
            logger: silentLogger,
          },
        );
        return 'Asked Bob to check the numbers.';
      }
      if (agent.id === 'bob')
        return `Checked: ${message.content.length} characters received from ${message.from}.`;
      return '';
    };
    runtime = make(runTurn);
    sendMessage = createSendMessageTool(runtime);
    await runtime.spawn({ id: 'alice', name: 'Alice' });
    await runtime.spawn({ id: 'bob', name: 'Bob' });
    const bobSpoke = nextEvent(bus, 'agent:spoke', (data) => data.agentId === 'bob');
    const task = await runtime.assignTask('alice', { taskName: 'Review the quarterly numbers' });
    expect((await bobSpoke).data).toMatchObject({
      recipient: 'alice',
      content: expect.stringContaining('from alice'),
    });
    await runtime.whenIdle('alice');
    await runtime.whenIdle('bob');
    const bobLog = await runtime.conversation('bob');
    expect(bobLog[0]).toMatchObject({
      sender: 'alice',
      recipient: 'bob',
      content: 'Bob, can you check the numbers?',
    });
    expect(bobLog[1]).toMatchObject({ sender: 'bob', recipient: 'alice' });
    const tasks = await runtime.tasks('alice');
    expect(tasks).toEqual([
      expect.objectContaining({
        id: task.id,
        status: 'completed',
        result: 'Asked Bob to check the numbers.',
      }),
    ]);
    expect(events.some((event) => event.type === 'agent:task-assigned')).toBe(true);
    expect(events.find((event) => event.type === 'agent:task-completed')?.data).toMatchObject({
      taskId: task.id,
      status: 'completed',
    });
    await expect(
      sendMessage.execute(
        { to: 'alice', content: 'hi me' },
        {
          runId: 'r',
          agentId: 'alice',
          toolCallId: 't',
          workspaceDir: '/tmp',
          signal: new AbortController().signal,
          bus,
          logger: silentLogger,
        },
      ),
    ).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
  });

  it('a failing turn goes through error back to idle and the agent keeps working', async () => {
    let calls = 0;
    runtime = make(async () => {
      calls++;
      if (calls === 1) throw new Error('model unavailable');
      return 'fine now';
    });
    await runtime.spawn({ id: 'a', name: 'A' });
    await runtime.send('a', { from: 'user', content: 'one' });
    await runtime.whenIdle('a');
    await runtime.send('a', { from: 'user', content: 'two' });
    await runtime.whenIdle('a');
    const transitions = (await runtime.history('a')).map((entry) => entry.newState);
    expect(transitions).toEqual([
      'listening',
      'thinking',
      'error',
      'idle',
      'listening',
      'thinking',
      'speaking',
      'idle',
    ]);
  });

  it('terminate is graceful (the current turn finishes) and forced after the timeout', async () => {
    const gate = deferred<string>();
    runtime = make(async (agent, message, signal) => {
      if (agent.id === 'stubborn') return hang(agent, message, signal);
      signal.throwIfAborted();
      return gate.promise;
    });
    await runtime.spawn({ id: 'polite', name: 'Polite' });
    await runtime.spawn({ id: 'stubborn', name: 'Stubborn' });
    await runtime.send('polite', { from: 'user', content: 'finish this' });
    await nextEvent(bus, 'agent:state', (data) => data.agentId === 'polite' && data.to === 'thinking');
    const terminating = runtime.terminate('polite', { timeoutMs: 60_000 });
    gate.resolve('done');
    expect(await terminating).toEqual({ forced: false });
    expect(
      events.some((event) => event.type === 'agent:spoke' && (event.data as any).content === 'done'),
    ).toBe(true);

    await runtime.send('stubborn', { from: 'user', content: 'never ends' });
    await nextEvent(bus, 'agent:state', (data) => data.agentId === 'stubborn' && data.to === 'thinking');
    expect(await runtime.terminate('stubborn', { timeoutMs: 20 })).toEqual({ forced: true });
    expect(runtime.listStates()).toEqual([]);
  });

  it('agents survive a restart: definitions reload, an interrupted turn returns to idle and runs again, terminated ones stay gone', async () => {
    runtime = make(
      async (agent, message, signal) => (agent.id === 'busy' ? hang(agent, message, signal) : 'ok'),
      {
        terminateTimeoutMs: 20,
      },
    );
    await runtime.spawn({ id: 'keeper', name: 'Keeper', role: 'archivist', model: 'local/agentd-local' });
    await runtime.spawn({ id: 'busy', name: 'Busy' });
    await runtime.spawn({ id: 'gone', name: 'Gone' });
    await runtime.terminate('gone');
    await runtime.send('busy', { from: 'user', content: 'long job' });
    await nextEvent(bus, 'agent:state', (data) => data.agentId === 'busy' && data.to === 'thinking');
    // The process goes away mid-turn: close gives up on the hung turn, which stays `thinking` in the store.
    const first = runtime;
    runtime = undefined;
    await first.close();

    runtime = make();
    const restored = await runtime.start();
    expect(restored.map((agent) => agent.id).sort()).toEqual(['busy', 'keeper']);
    expect(runtime.getState('keeper')).toMatchObject({ name: 'Keeper', role: 'archivist', state: 'idle' });
    // The message whose turn the restart cut short is taken again, and answered this time.
    await runtime.whenIdle('busy');
    const busyHistory = (await runtime.history('busy')).map((entry) => [entry.newState, entry.reason]);
    expect(busyHistory.slice(-5)).toEqual([
      ['idle', 'restarted'],
      ['listening', 'message from user'],
      ['thinking', null],
      ['speaking', null],
      ['idle', null],
    ]);
    expect((await runtime.conversation('busy')).map((entry) => entry.content)).toEqual([
      'long job',
      'Busy heard: long job',
    ]);
    await runtime.send('keeper', { from: 'user', content: 'still there?' });
    await runtime.whenIdle('keeper');
    expect((await runtime.conversation('keeper')).at(-1)).toMatchObject({
      content: 'Keeper heard: still there?',
    });
  });

  it('answers after a restart every message the mailbox held, in order, and a task assigned before it', async () => {
    const first = make(hang, { terminateTimeoutMs: 20 });
    runtime = first;
    await spawnBusy(first, { id: 'queue', name: 'Queue' }, 'one');
    await first.send('queue', { from: 'user', content: 'two' });
    await first.broadcast({ content: 'three' });
    const task = await first.assignTask('queue', { taskName: 'four' });
    expect(first.getState('queue').mailboxDepth).toBe(3);
    runtime = undefined;
    await first.close();

    const seen: string[] = [];
    runtime = make(async (agent, message) => {
      seen.push(`${message.kind}:${message.content}`);
      return `${agent.name} heard: ${message.content}`;
    });
    await runtime.start();
    await runtime.whenIdle('queue');
    expect(seen).toEqual(['message:one', 'message:two', 'broadcast:three', 'task:four']);
    expect(await runtime.tasks('queue')).toMatchObject([
      { id: task.id, status: 'completed', result: 'Queue heard: four' },
    ]);
    expect(await getDb().all('SELECT seq FROM agent_mailbox')).toEqual([]);
    // Answered once: a third start has nothing to take.
    await runtime.close();
    seen.length = 0;
    runtime = make(echoNoting(seen));
    await runtime.start();
    await runtime.whenIdle('queue');
    expect(seen).toEqual([]);
  });

  it("leaves a live process's waiting messages to it, and takes those of a process that is gone", async () => {
    const serving = make(hang, { terminateTimeoutMs: 20 });
    runtime = serving;
    await spawnBusy(serving, { id: 'shared', name: 'Shared' }, 'held by the server');
    await serving.send('shared', { from: 'user', content: 'waiting at the server' });

    // Another runtime on the same database while the first is open (`agentd mcp` beside `agentd serve`).
    const seen: string[] = [];
    const answer = echoNoting(seen);
    const beside = make(answer);
    await beside.start();
    await beside.whenIdle('shared');
    expect(seen).toEqual([]);
    await beside.close();

    // Rows of a process on this host that has exited are taken; another host's are not this one's to judge.
    const exited = spawnSync(process.execPath, ['-e', '']).pid;
    const insertMail =
      'INSERT INTO agent_mailbox (agent_id, kind, sender, content, owner, created_at) VALUES (?, ?, ?, ?, ?, ?)';
    await getDb().run(insertMail, [
      'shared',
      'message',
      'user',
      'left by an exited process',
      `${hostname()}/${exited}/x`,
      1,
    ]);
    await getDb().run(insertMail, [
      'shared',
      'message',
      'user',
      'held on another host',
      'elsewhere.example/1/x',
      2,
    ]);

    runtime = undefined;
    await serving.close();
    runtime = make(answer);
    await runtime.start();
    await runtime.whenIdle('shared');
    expect(seen).toEqual(['held by the server', 'waiting at the server', 'left by an exited process']);
    expect(await getDb().all<{ content: string }>('SELECT content FROM agent_mailbox')).toEqual([
      { content: 'held on another host' },
    ]);
  });

  it("takes back a closed runtime's messages though both runtimes were given the same sequence of ids", async () => {
    const first = createAgentRuntime({
      db: getDb(),
      bus,
      runTurn: hang,
      logger: silentLogger,
      idGenerator: createSequentialIdGenerator(),
      terminateTimeoutMs: 20,
    });
    await spawnBusy(first, { id: 'twin', name: 'Twin' }, 'answer me later');
    await first.close();
    runtime = createAgentRuntime({
      db: getDb(),
      bus,
      runTurn: echo,
      logger: silentLogger,
      idGenerator: createSequentialIdGenerator(),
    });
    await runtime.start();
    await runtime.whenIdle('twin');
    expect((await runtime.conversation('twin')).map((entry) => entry.content)).toEqual([
      'answer me later',
      'Twin heard: answer me later',
    ]);
  });

  it('gives up at a start on a message whose turns were cut short too often, failing its task', async () => {
    let taskId = '';
    for (let start = 0; start < 3; start++) {
      const current = make(hang, { terminateTimeoutMs: 20 });
      runtime = current;
      const thinking = nextEvent(
        bus,
        'agent:state',
        (data) => data.agentId === 'crashy' && data.to === 'thinking',
      );
      if (start === 0) {
        await current.spawn({ id: 'crashy', name: 'Crashy' });
        taskId = (await current.assignTask('crashy', { taskName: 'brings the process down' })).id;
      } else await current.start();
      await thinking;
      runtime = undefined;
      await current.close();
    }
    const seen: string[] = [];
    runtime = make(echoNoting(seen));
    await runtime.start();
    await runtime.whenIdle('crashy');
    expect(seen).toEqual([]);
    expect(await runtime.tasks('crashy')).toMatchObject([
      { id: taskId, status: 'failed', result: 'its turn was cut short 3 times' },
    ]);
    expect(await getDb().all('SELECT seq FROM agent_mailbox')).toEqual([]);
  });

  it('counts messages still being written against a full mailbox', async () => {
    runtime = make(hang, {
      mailboxSize: 1,
      terminateTimeoutMs: 20,
    });
    await spawnBusy(runtime, { id: 'small', name: 'Small' }, 'taken at once');
    const [kept, refusedSend] = await Promise.allSettled([
      runtime.send('small', { from: 'user', content: 'waits' }),
      runtime.send('small', { from: 'user', content: 'no room' }),
    ]);
    expect(kept.status).toBe('fulfilled');
    expect(refusedSend).toMatchObject({ status: 'rejected', reason: { code: 'QUEUE_FULL' } });
    await expect(runtime.assignTask('small', { taskName: 'no room either' })).rejects.toMatchObject({
      code: 'QUEUE_FULL',
    });
    expect(runtime.getState('small').mailboxDepth).toBe(1);
    expect(await runtime.tasks('small')).toMatchObject([{ status: 'failed', result: 'mailbox full' }]);
  });

  it("answers a client's move once the position is on disk", async () => {
    runtime = make();
    const methods = createAgentGatewayMethods({ runtime });
    await runtime.spawn({ id: 'walker', name: 'Walker', position: { x: 1, y: 1 } });
    await runtime.written('walker');
    await methods['agents.move']!.handler({ agentId: 'walker', x: 40, y: 50 });
    // Read as the answer arrives: what a restart right then would load.
    expect(
      await getDb().get('SELECT position_x, position_y FROM agents WHERE id = ?', ['walker']),
    ).toMatchObject({ position_x: 40, position_y: 50 });
  });

  it("answers a client's move the disk refuses with STORE_UNAVAILABLE, and writes it once the disk is back", async () => {
    const faulty = createFaultyDatabase(getDb());
    runtime = createAgentRuntime({
      db: faulty,
      bus,
      runTurn: echo,
      logger: silentLogger,
      writeRetryMs: 5,
      maxWriteRetryMs: 20,
    });
    const methods = createAgentGatewayMethods({ runtime });
    await runtime.spawn({ id: 'walker', name: 'Walker', position: { x: 1, y: 1 } });
    await runtime.written('walker');
    faulty.failWrites();
    await expect(methods['agents.move']!.handler({ agentId: 'walker', x: 40, y: 50 })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      retryable: true,
    });
    expect(
      await getDb().get('SELECT position_x, position_y FROM agents WHERE id = ?', ['walker']),
    ).toMatchObject({ position_x: 1, position_y: 1 });
    await expect(runtime.written('walker')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });

    faulty.heal();
    // The move was kept: the retry writes it, and the same move again is answered once it is on disk.
    await vi.waitFor(
      async () =>
        expect(
          await getDb().get('SELECT position_x, position_y FROM agents WHERE id = ?', ['walker']),
        ).toMatchObject({ position_x: 40, position_y: 50 }),
      { timeout: 5_000 },
    );
    await expect(methods['agents.move']!.handler({ agentId: 'walker', x: 41, y: 50 })).resolves.toMatchObject(
      { agent: { position: { x: 41, y: 50 } } },
    );
    expect(await getDb().get('SELECT position_x FROM agents WHERE id = ?', ['walker'])).toMatchObject({
      position_x: 41,
    });
  });

  it('keeps an agent whose termination the disk refuses running, so the retry terminates it', async () => {
    const faulty = createFaultyDatabase(getDb());
    runtime = createAgentRuntime({ db: faulty, bus, runTurn: echo, logger: silentLogger });
    await runtime.spawn({ id: 'stays', name: 'Stays' });
    await runtime.written('stays');
    faulty.failWrites();
    await expect(runtime.terminate('stays')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    faulty.heal();
    // Not NOT_FOUND, and still answering: on disk it was never terminated.
    expect(runtime.getState('stays')).toMatchObject({ id: 'stays' });
    await runtime.send('stays', { from: 'user', content: 'still there?' });
    await runtime.whenIdle('stays');
    expect((await runtime.conversation('stays')).map((entry) => entry.content)).toEqual([
      'still there?',
      'Stays heard: still there?',
    ]);

    await runtime.terminate('stays');
    expect(await getDb().get('SELECT status FROM agents WHERE id = ?', ['stays'])).toMatchObject({
      status: 'terminated',
    });
    expect(() => runtime!.getState('stays')).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
  });

  it("agents.history answers the agent's newest tasks within its limit, oldest first", async () => {
    runtime = make();
    const methods = createAgentGatewayMethods({ runtime });
    await runtime.spawn({ id: 'busy', name: 'Busy' });
    for (const task of ['first', 'second', 'third']) {
      await methods['agents.assign']!.handler({ agentId: 'busy', task, taskId: task });
      await runtime.whenIdle('busy');
    }
    const answer = (await methods['agents.history']!.handler({ agentId: 'busy', limit: 2 })) as {
      tasks: Array<{ id: string }>;
    };
    expect(answer.tasks.map((task) => task.id)).toEqual(['second', 'third']);
  });

  it('refuses a task id already taken with CONFLICT, writing nothing', async () => {
    runtime = make();
    const methods = createAgentGatewayMethods({ runtime });
    await runtime.spawn({ id: 'worker', name: 'Worker' });
    await methods['agents.assign']!.handler({ agentId: 'worker', task: 'first', taskId: 'chosen' });
    await runtime.whenIdle('worker');
    await expect(
      methods['agents.assign']!.handler({ agentId: 'worker', task: 'second', taskId: 'chosen' }),
    ).rejects.toMatchObject({ code: 'CONFLICT' });
    await runtime.whenIdle('worker');
    expect(await runtime.tasks('worker')).toMatchObject([
      { id: 'chosen', taskName: 'first', status: 'completed' },
    ]);
    expect(
      (await runtime.conversation('worker'))
        .filter((entry) => entry.sender !== 'worker')
        .map((entry) => entry.content),
    ).toEqual(['first']);
    expect(await getDb().all('SELECT seq FROM agent_mailbox')).toEqual([]);
  });

  it('terminating an agent fails the tasks its mailbox still held and empties it on disk', async () => {
    runtime = make(hang);
    await spawnBusy(runtime, { id: 'leaving', name: 'Leaving' }, 'in progress');
    const waiting = await runtime.assignTask('leaving', { taskName: 'never started' });
    await runtime.terminate('leaving', { timeoutMs: 20 });
    expect(await runtime.tasks('leaving')).toMatchObject([
      { id: waiting.id, status: 'failed', result: 'agent terminated' },
    ]);
    expect(
      events.some(
        (event) =>
          event.type === 'agent:task-completed' &&
          (event.data as { taskId: string; status: string }).taskId === waiting.id &&
          (event.data as { status: string }).status === 'failed',
      ),
    ).toBe(true);
    expect(await getDb().all('SELECT seq FROM agent_mailbox')).toEqual([]);
  });

  it('a task the disk cannot take is refused whole: neither its row nor its message is there', async () => {
    const faulty = createFaultyDatabase(getDb());
    runtime = createAgentRuntime({ db: faulty, bus, runTurn: echo, logger: silentLogger });
    await runtime.spawn({ id: 'full', name: 'Full' });
    faulty.failWrites();
    await expect(runtime.assignTask('full', { taskName: 'write me' })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
    });
    await expect(runtime.broadcast({ content: 'anyone?' })).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
    });
    faulty.heal();
    expect(runtime.getState('full').mailboxDepth).toBe(0);
    expect(await runtime.tasks('full')).toEqual([]);
    expect(await getDb().all('SELECT seq FROM agent_mailbox')).toEqual([]);
  });

  it('refuses a message the disk cannot take, keeps what a turn wrote meanwhile and writes it, in order, once the disk is back', async () => {
    const faulty = createFaultyDatabase(getDb());
    const answer = deferred();
    runtime = createAgentRuntime({
      db: faulty,
      bus,
      runTurn: echoAfter(answer.promise),
      logger: silentLogger,
      writeRetryMs: 5,
      maxWriteRetryMs: 20,
    });
    await runtime.spawn({ id: 'a', name: 'A' });
    const thinking = nextEvent(bus, 'agent:state', (data) => data.agentId === 'a' && data.to === 'thinking');
    await runtime.send('a', { from: 'user', content: 'before the disk filled' });
    await thinking;
    await runtime.conversation('a');
    faulty.failWrites();
    // Not acknowledged: the caller hears the store's error, and nothing waits in the mailbox.
    await expect(
      runtime.send('a', { from: 'user', content: 'while the disk is full' }),
    ).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
    });
    expect(runtime.getState('a').mailboxDepth).toBe(0);
    answer.resolve();
    await runtime.whenIdle('a');
    expect(faulty.refused).toBeGreaterThan(1);
    expect(await runtime.conversation('a')).toHaveLength(1);

    faulty.heal();
    await vi.waitFor(async () => expect(await runtime!.conversation('a')).toHaveLength(2), {
      timeout: 5_000,
    });
    expect((await runtime.conversation('a')).map((entry) => entry.content)).toEqual([
      'before the disk filled',
      'A heard: before the disk filled',
    ]);
    expect((await runtime.history('a')).map((entry) => entry.newState)).toEqual([
      'listening',
      'thinking',
      'speaking',
      'idle',
    ]);
    // What a restart reads: the agent's last state, and no message left to answer again.
    const row = await getDb().get<{ state: string }>('SELECT state FROM agents WHERE id = ?', ['a']);
    expect(row?.state).toBe('idle');
    expect(await getDb().all('SELECT seq FROM agent_mailbox')).toEqual([]);
  });

  it('writes at close what the disk refused before it came back, when no retry has run yet', async () => {
    const faulty = createFaultyDatabase(getDb());
    const answer = deferred();
    const closing = createAgentRuntime({
      db: faulty,
      bus,
      runTurn: echoAfter(answer.promise),
      logger: silentLogger,
      writeRetryMs: 600_000,
    });
    await closing.spawn({ id: 'b', name: 'B' });
    await closing.send('b', { from: 'user', content: 'late' });
    faulty.failWrites();
    answer.resolve();
    await closing.whenIdle('b');
    faulty.heal();
    await closing.close();
    const rows = await getDb().all<{ content: string }>(
      'SELECT content FROM agent_conversations WHERE agent_id = ? ORDER BY id',
      ['b'],
    );
    expect(rows.map((row) => row.content)).toEqual(['late', 'B heard: late']);
  });
});

describe('agent runtime without stuck listening', () => {
  let db: SqlDatabase;
  beforeEach(async () => {
    db = await openTestDatabase('sqlite');
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(async () => {
    vi.useRealTimers();
    await db.close();
  });

  it('an agent waiting for a turn slot leaves listening after the timeout and still answers later', async () => {
    const bus = createBus();
    const gate = deferred<string>();
    const runtime = createAgentRuntime({
      db,
      bus,
      maxConcurrentTurns: 1,
      listeningTimeoutMs: 1_000,
      runTurn: async (agent, message) => (agent.id === 'a' ? gate.promise : `b got ${message.content}`),
    });
    await runtime.spawn({ id: 'a', name: 'A' });
    await runtime.spawn({ id: 'b', name: 'B' });
    await runtime.send('a', { from: 'user', content: 'hold the slot' });
    await vi.advanceTimersByTimeAsync(0);
    expect(runtime.getState('a').state).toBe('thinking');
    await runtime.send('b', { from: 'user', content: 'hello' });
    await vi.advanceTimersByTimeAsync(0);
    expect(runtime.getState('b').state).toBe('listening');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(runtime.getState('b').state).toBe('idle');
    gate.resolve('a done');
    await runtime.whenIdle('a');
    await runtime.whenIdle('b');
    const history = (await runtime.history('b')).map(
      (entry) => `${entry.newState}${entry.reason?.startsWith('listening timeout') ? '(timeout)' : ''}`,
    );
    expect(history).toEqual(['listening', 'idle(timeout)', 'thinking', 'speaking', 'idle']);
    await runtime.close();
  });
});

describe('agent.control over the gateway methods', () => {
  it('goal plans through the planner; state, pause, resume and cancel act on the session tasks', async () => {
    const db = await openTestDatabase('sqlite');
    const bus = createBus();
    const queue = createWorkQueue({ db, bus });
    const pool = createWorkerPool({
      queue,
      bus,
      runItem: async () => ({ summary: 'ok' }),
      concurrency: 1,
      admissionQueueSize: 10,
    });
    const planner = createPlanner({ model: createLocalModel(), queue, bus, submitTask: pool.submit });
    const runtime = createAgentRuntime({ db, bus, runTurn: echo });
    const methods = createAgentGatewayMethods({ runtime, planner, pool });
    const planned = (await methods['agent.control']!.handler({
      action: 'goal',
      goal: 'draft; review',
      sessionKey: 's',
    })) as any;
    expect(planned.tasks).toHaveLength(2);
    expect(
      ((await methods['agent.control']!.handler({ action: 'state', sessionKey: 's' })) as any).counts,
    ).toMatchObject({ queued: 2 });
    expect(
      ((await methods['agent.control']!.handler({ action: 'pause', sessionKey: 's' })) as any).workItemIds,
    ).toHaveLength(2);
    expect(
      ((await methods['agent.control']!.handler({ action: 'state', sessionKey: 's' })) as any).counts,
    ).toMatchObject({ paused: 2 });
    expect(
      (
        (await methods['agent.control']!.handler({
          action: 'resume',
          sessionKey: 's',
          ids: [planned.tasks[0].workItemId],
        })) as any
      ).workItemIds,
    ).toHaveLength(1);
    expect(
      ((await methods['agent.control']!.handler({ action: 'cancel', sessionKey: 's' })) as any).workItemIds,
    ).toHaveLength(2);
    await expect(
      methods['agent.control']!.handler({ action: 'explode', sessionKey: 's' }),
    ).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    await runtime.close();
    await queue.close();
    await db.close();
  });
});
