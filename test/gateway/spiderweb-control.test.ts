import { afterEach, describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/runtime.js';
import { memoryMaintenanceKind } from '../../src/work/index.js';
import { connectSpiderweb, startRuntime } from '../runtime/helpers.js';

let runtime: Runtime | undefined;
afterEach(async () => {
  await runtime?.close();
  runtime = undefined;
});

async function connect() {
  const started = await startRuntime();
  runtime = started.runtime;
  const base = started.url.replace(/\/$/, '');
  const client = await connectSpiderweb(
    `${base}/v1/agents/main/stream?session=control&token=${encodeURIComponent(started.runtime.state.token)}`,
  );
  await client.next((message) => message.type === 'session.ack');
  return { started, client };
}

describe('Spiderweb agent.control and agent.heartbeat against a running agentd', () => {
  it('sends /goal, receives the synthesis as a session.receive answering it, then reads status and plan', async () => {
    const { client } = await connect();
    client.send({ type: 'session.send', id: 'g1', content: '/goal Count the boats. Then paint the fence.' });
    const plan = await client.next((message) => message.type === 'agent.control' && message.request === 'g1');
    expect(plan.tasks.map((task: { title: string }) => task.title)).toEqual([
      'Count the boats',
      'Then paint the fence',
    ]);
    const synthesis = await client.next(
      (message) => message.type === 'session.receive' && message.request === 'g1',
    );
    expect(synthesis).toMatchObject({ sessionKey: 'agent:main:control', planId: plan.planId });
    expect(synthesis.content).toContain('Results for "Count the boats. Then paint the fence."');
    // The goal's answer came first.
    expect(client.received.indexOf(plan)).toBeLessThan(client.received.indexOf(synthesis));

    client.send({ type: 'agent.control', id: 's1', action: 'status' });
    expect(await client.next((message) => message.request === 's1')).toMatchObject({
      type: 'agent.control',
      action: 'status',
      counts: { queued: 0, active: 0 },
      agents: expect.any(Array),
    });

    client.send({ type: 'agent.control', id: 'p1', action: 'plan' });
    const current = await client.next((message) => message.request === 'p1');
    expect(current).toMatchObject({ type: 'agent.control', action: 'plan', planId: plan.planId });
    expect(current.tasks.map((task: { state: string }) => task.state)).toEqual(['completed', 'completed']);
  });

  it('takes an idempotency key with a goal: sent again, the plan already made; another goal under it, conflict', async () => {
    const { started, client } = await connect();
    client.send({
      type: 'session.send',
      id: 'k1',
      content: '/goal Count the boats. Then paint the fence.',
      idempotency_key: 'boats-1',
    });
    const first = await client.next(
      (message) => message.type === 'agent.control' && message.request === 'k1',
    );
    expect(first.tasks).toHaveLength(2);
    await client.next((message) => message.type === 'session.receive' && message.request === 'k1');

    // The answer was lost: the client sends the goal again, as a /goal or as agent.control.
    client.send({
      type: 'session.send',
      id: 'k2',
      content: '/goal Count the boats. Then paint the fence.',
      idempotency_key: 'boats-1',
    });
    const again = await client.next((message) => message.request === 'k2');
    expect(again).toMatchObject({ type: 'agent.control', planId: first.planId });
    // Its synthesis too, as the answer to this request: the first's went to the first.
    const replayedSynthesis = await client.next(
      (message) => message.type === 'session.receive' && message.request === 'k2',
    );
    expect(replayedSynthesis).toMatchObject({ planId: first.planId });
    expect(replayedSynthesis.content).toContain('Results for "Count the boats. Then paint the fence."');
    // On a connection of its own, as a client that lost the first connection with the answer sends it.
    const base = started.url.replace(/\/$/, '');
    const other = await connectSpiderweb(
      `${base}/v1/agents/main/stream?session=control&token=${encodeURIComponent(started.runtime.state.token)}`,
    );
    await other.next((message) => message.type === 'session.ack');
    other.send({
      type: 'session.send',
      id: 'k2b',
      content: '/goal Count the boats. Then paint the fence.',
      idempotency_key: 'boats-1',
    });
    expect(
      await other.next((message) => message.request === 'k2b' && message.type === 'agent.control'),
    ).toMatchObject({ planId: first.planId });
    expect(
      await other.next((message) => message.type === 'session.receive' && message.request === 'k2b'),
    ).toMatchObject({ planId: first.planId, content: replayedSynthesis.content });
    other.socket.close();
    client.send({
      type: 'agent.control',
      id: 'k3',
      action: 'goal',
      goal: 'Count the boats. Then paint the fence.',
      idempotencyKey: 'boats-1',
    });
    expect(await client.next((message) => message.request === 'k3')).toMatchObject({ planId: first.planId });
    const tasks = await started.runtime.work.queue.list({ kinds: ['task'], limit: 100 });
    expect(tasks).toHaveLength(2);

    client.send({
      type: 'agent.control',
      id: 'k4',
      action: 'goal',
      goal: 'Sink the boats.',
      idempotency_key: 'boats-1',
    });
    expect(await client.next((message) => message.request === 'k4')).toMatchObject({
      type: 'error',
      code: 'conflict',
    });
    client.send({
      type: 'agent.control',
      id: 'k5',
      action: 'goal',
      goal: 'Sink the boats.',
      idempotency_key: 7,
    });
    expect(await client.next((message) => message.request === 'k5')).toMatchObject({
      type: 'error',
      code: 'invalid_request',
    });
    expect(await started.runtime.work.queue.list({ kinds: ['task'], limit: 100 })).toHaveLength(2);
  });

  it('accepts an inbound agent.heartbeat (and agent.control heartbeat) and answers with the sweep', async () => {
    const { client } = await connect();
    client.send({ type: 'agent.heartbeat', id: 'h1' });
    const beat = await client.next((message) => message.request === 'h1');
    expect(beat).toMatchObject({
      type: 'agent.control',
      action: 'heartbeat',
      blocked: [],
      stalled: [],
      agents: expect.any(Array),
    });
    client.send({ type: 'agent.control', id: 'h2', action: 'heartbeat' });
    expect(await client.next((message) => message.request === 'h2')).toMatchObject({ action: 'heartbeat' });
  });

  it('answers plan without a goal with an error, and pushes no progress for memory maintenance', async () => {
    const { started, client } = await connect();
    client.send({ type: 'agent.control', id: 'p0', action: 'plan' });
    expect(await client.next((message) => message.request === 'p0')).toMatchObject({ type: 'error' });

    await started.runtime.startBackground();
    const pool = started.runtime.work.pool!;
    await pool.submit({ kind: memoryMaintenanceKind, title: 'memory maintenance', agentId: 'system' });
    await pool.idle();
    // A ping answered after the maintenance ended: everything sent before it has arrived.
    client.send({ type: 'ping', id: 'after' });
    await client.next((message) => message.type === 'pong' && message.request === 'after');
    expect(client.received.filter((message) => message.type === 'agent.progress')).toEqual([]);
  });
});
