import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type ActiveSession,
  type ClientContext,
  client,
  type RequestPermissionRequest,
  type SessionUpdate,
} from '@agentclientprotocol/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { acpAgentFor } from '../../src/cli/acp-agent.js';
import { loadConfig } from '../../src/config/index.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { type FakeOpenAIServer, startFakeOpenAIServer } from '../helpers/fake-openai-server.js';
import { captureLog, tempHome } from '../runtime/helpers.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(yaml: Record<string, unknown> = {}): Promise<{
  runtime: Runtime;
  model: FakeOpenAIServer;
  home: string;
}> {
  const model = await startFakeOpenAIServer();
  cleanups.push(() => model.close());
  const home = tempHome('agentd-acp-');
  writeFileSync(join(home, 'agentd.yaml'), JSON.stringify(yaml));
  const env = { AGENTD_HOME: home, OPENAI_BASE_URL: model.baseURL, AGENTD_MODEL: 'openai/gpt-test' };
  const runtime = await createRuntime({
    config: loadConfig({ cwd: home, env }),
    env,
    logDestination: captureLog().stream,
  });
  cleanups.push(() => runtime.close());
  return { runtime, model, home };
}

/** Reads updates until the turn stops. */
async function readTurn(session: ActiveSession): Promise<{ updates: SessionUpdate[]; stopReason: string }> {
  const updates: SessionUpdate[] = [];
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === 'stop') return { updates, stopReason: message.stopReason };
    updates.push(message.update);
  }
}

function textOf(updates: SessionUpdate[], kind = 'agent_message_chunk'): string {
  return updates
    .filter((update) => update.sessionUpdate === kind)
    .map((update) =>
      update.sessionUpdate === kind && 'content' in update && update.content && !Array.isArray(update.content)
        ? update.content.type === 'text'
          ? update.content.text
          : ''
        : '',
    )
    .join('');
}

describe('agentd as an ACP agent (in-process)', () => {
  it('runs initialize → new session → prompt with streamed text and tool calls → end_turn, then reloads', async () => {
    const { runtime, model } = await setup();
    writeFileSync(join(runtime.state.workspaceDir, 'notes.md'), 'tide pools are rocky');
    model.respond(
      {
        type: 'stream',
        text: ['Let me look. '],
        toolCalls: [{ id: 'call_read', name: 'read_file', argumentChunks: ['{"path":"notes.md"}'] }],
      },
      { type: 'stream', text: ['They are ', 'rocky.'] },
    );
    const agentApp = acpAgentFor(runtime);
    const sessionId = await client().connectWith(agentApp, async (ctx: ClientContext) => {
      const init = await ctx.request('initialize', { protocolVersion: 1, clientCapabilities: {} });
      expect(init).toMatchObject({ protocolVersion: 1, agentCapabilities: { loadSession: true } });
      const session = await ctx.buildSession('/tmp').start();
      void session.prompt('What are tide pools like?');
      const { updates, stopReason } = await readTurn(session);
      expect(stopReason).toBe('end_turn');
      expect(textOf(updates)).toBe('Let me look. They are rocky.');
      const toolCall = updates.find((update) => update.sessionUpdate === 'tool_call');
      expect(toolCall).toMatchObject({
        toolCallId: 'call_read',
        title: 'read_file notes.md',
        kind: 'read',
        status: 'in_progress',
        rawInput: { path: 'notes.md' },
      });
      const done = updates.find((update) => update.sessionUpdate === 'tool_call_update');
      expect(done).toMatchObject({ toolCallId: 'call_read', status: 'completed' });
      expect(JSON.stringify(done)).toContain('tide pools are rocky');
      // Text before the tool call, the call, its result, then the answer: in that order.
      expect(updates.map((update) => update.sessionUpdate)).toEqual([
        'agent_message_chunk',
        'tool_call',
        'tool_call_update',
        'agent_message_chunk',
        'agent_message_chunk',
      ]);
      return session.sessionId;
    });

    const replayed: SessionUpdate[] = [];
    await client()
      .onNotification('session/update', ({ params }) => {
        replayed.push(params.update);
      })
      .connectWith(acpAgentFor(runtime), async (ctx) => {
        await ctx.request('initialize', { protocolVersion: 1 });
        await ctx.request('session/load', { sessionId, cwd: '/tmp', mcpServers: [] });
        await expect(
          ctx.request('session/load', { sessionId: 'acp-unknown', cwd: '/tmp', mcpServers: [] }),
        ).rejects.toMatchObject({ code: -32002 });
      });
    expect(textOf(replayed, 'user_message_chunk')).toBe('What are tide pools like?');
    // Both assistant messages of the turn (before and after the tool call) are in the transcript.
    expect(textOf(replayed)).toBe('Let me look. They are rocky.');
  });

  it('asks the editor before an ask-first tool, and honours reject and allow-always', async () => {
    const { runtime, model } = await setup({
      policy: { policies: [{ name: 'careful', rules: [{ target_id: 'write_file', action: 'ask' }] }] },
    });
    const write = (id: string, path: string) => ({
      type: 'stream' as const,
      toolCalls: [{ id, name: 'write_file', argumentChunks: [JSON.stringify({ path, content: 'hello' })] }],
    });
    model.respond(
      write('call_1', 'a.md'),
      { type: 'stream', text: ['Not written.'] },
      write('call_2', 'b.md'),
      { type: 'stream', text: ['Written.'] },
      write('call_3', 'c.md'),
      { type: 'stream', text: ['Written again.'] },
    );
    const asked: RequestPermissionRequest[] = [];
    const answers = ['reject_once', 'allow_always'];
    await client()
      .onRequest('session/request_permission', ({ params }) => {
        asked.push(params);
        return { outcome: { outcome: 'selected', optionId: answers.shift()! } };
      })
      .connectWith(acpAgentFor(runtime), async (ctx) => {
        await ctx.request('initialize', { protocolVersion: 1 });
        const session = await ctx.buildSession('/tmp').start();
        void session.prompt('write a.md');
        const first = await readTurn(session);
        expect(first.updates.find((update) => update.sessionUpdate === 'tool_call_update')).toMatchObject({
          toolCallId: 'call_1',
          status: 'failed',
        });
        void session.prompt('write b.md');
        const second = await readTurn(session);
        expect(second.updates.find((update) => update.sessionUpdate === 'tool_call_update')).toMatchObject({
          toolCallId: 'call_2',
          status: 'completed',
        });
        void session.prompt('write c.md');
        await readTurn(session);
      });
    expect(asked.map((request) => request.toolCall.toolCallId)).toEqual(['call_1', 'call_2']);
    expect(asked[0]).toMatchObject({
      toolCall: { kind: 'edit', status: 'pending', rawInput: { path: 'a.md', content: 'hello' } },
      options: expect.arrayContaining([expect.objectContaining({ kind: 'allow_always' })]),
    });
    expect(existsSync(join(runtime.state.workspaceDir, 'a.md'))).toBe(false);
    expect(existsSync(join(runtime.state.workspaceDir, 'b.md'))).toBe(true);
    expect(existsSync(join(runtime.state.workspaceDir, 'c.md'))).toBe(true);
  });

  it('cancels a running prompt with stopReason cancelled', async () => {
    const { runtime, model } = await setup();
    model.respond({ type: 'hang' });
    await client().connectWith(acpAgentFor(runtime), async (ctx) => {
      await ctx.request('initialize', { protocolVersion: 1 });
      const session = await ctx.buildSession('/tmp').start();
      const response = session.prompt('this will hang');
      await model.waitForRequests(1);
      await ctx.notify('session/cancel', { sessionId: session.sessionId });
      expect(await response).toEqual({ stopReason: 'cancelled' });
    });
  });

  it("streams the planner's plan and its tasks' progress as plan updates", async () => {
    const { runtime } = await setup();
    const plans: SessionUpdate[] = [];
    let threePlans!: () => void;
    const gotThree = new Promise<void>((resolve) => {
      threePlans = resolve;
    });
    await client()
      .onNotification('session/update', ({ params }) => {
        if (params.update.sessionUpdate === 'plan') plans.push(params.update);
        if (plans.length === 3) threePlans();
      })
      .connectWith(acpAgentFor(runtime), async (ctx) => {
        await ctx.request('initialize', { protocolVersion: 1 });
        const { sessionId } = await ctx.request('session/new', { cwd: '/tmp', mcpServers: [] });
        const sessionKey = `agent:main:${sessionId}`;
        const task = (workItemId: string, title: string) => ({
          workItemId,
          title,
          description: title,
          agentId: null,
        });
        const work = { kind: 'task', state: 'running' as const, agentId: null, parentId: null };
        runtime.bus.publish(
          'agent:plan',
          {
            planId: 'plan_1',
            agentId: 'main',
            sessionKey,
            goal: 'g',
            reply: 'r',
            tasks: [task('w1', 'Collect'), task('w2', 'Draft')],
          },
          { sessionKey },
        );
        runtime.bus.publish('work:started', { ...work, workItemId: 'w1', workerId: 'x', attempt: 1 });
        runtime.bus.publish('work:started', { ...work, workItemId: 'other', workerId: 'x', attempt: 1 });
        runtime.bus.publish('work:completed', { ...work, workItemId: 'w1', durationMs: 5 });
        await gotThree;
      });
    expect(plans.map((plan) => ('entries' in plan ? plan.entries.map((entry) => entry.status) : []))).toEqual(
      [
        ['pending', 'pending'],
        ['in_progress', 'pending'],
        ['completed', 'pending'],
      ],
    );
    expect(plans[0]).toMatchObject({ entries: [{ content: 'Collect' }, { content: 'Draft' }] });
  });
  it('keeps 1,000 sessions open: the least recently used idle one is closed, and session/load opens it again', async () => {
    const { runtime, model } = await setup();
    model.respond({ type: 'stream', text: ['First answer.'] }, { type: 'stream', text: ['Back again.'] });
    await client().connectWith(acpAgentFor(runtime), async (ctx) => {
      await ctx.request('initialize', { protocolVersion: 1 });
      const first = await ctx.buildSession('/tmp').start();
      void first.prompt('Remember this session.');
      await readTurn(first);
      const subscribersWithOne = runtime.bus.subscriberCount;
      const newSession = () => ctx.request('session/new', { cwd: '/tmp', mcpServers: [] });
      for (let opened = 1; opened < 1_000; opened++) await newSession();
      const subscribersAtBound = runtime.bus.subscriberCount;
      expect(subscribersAtBound).toBeGreaterThan(subscribersWithOne);
      for (let opened = 0; opened < 200; opened++) await newSession();
      // Past the bound each new session takes the place of the oldest: no subscriptions pile up.
      expect(runtime.bus.subscriberCount).toBe(subscribersAtBound);
      await expect(
        ctx.request('session/prompt', {
          sessionId: first.sessionId,
          prompt: [{ type: 'text', text: 'Still there?' }],
        }),
      ).rejects.toMatchObject({ code: -32002 });
      // Its conversation is stored: loading it opens it again, and it answers.
      await ctx.request('session/load', { sessionId: first.sessionId, cwd: '/tmp', mcpServers: [] });
      const answer = await ctx.request('session/prompt', {
        sessionId: first.sessionId,
        prompt: [{ type: 'text', text: 'Still there?' }],
      });
      expect(answer).toEqual({ stopReason: 'end_turn' });
      expect(runtime.bus.subscriberCount).toBe(subscribersAtBound);
    });
  }, 60_000);
});
