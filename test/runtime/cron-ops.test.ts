import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayClient } from '../../src/cli/gateway-client.js';
import { collectRun, startRuntime } from './helpers.js';

/** cron.*, logs.tail and channels.status through the gateway of a real runtime (local model, SQLite). */
describe('operator methods of a running agentd', () => {
  let started: Awaited<ReturnType<typeof startRuntime>>;
  let client: GatewayClient;

  beforeAll(async () => {
    started = await startRuntime();
    client = await started.connect();
  });

  afterAll(async () => {
    await client?.close();
    await started?.runtime.close();
  });

  it('a cron task job, run now, submits a work item that work.list shows', async () => {
    const job = await client.call<any>('cron.add', {
      name: 'nightly digest',
      schedule: { kind: 'cron', expr: '0 3 * * *', tz: 'UTC' },
      sessionTarget: 'session:agent:main:reports',
      payload: { kind: 'task', title: 'Nightly digest', description: 'Summarise the day.' },
    });
    expect(job).toMatchObject({
      name: 'nightly digest',
      agentId: 'main',
      sessionKey: 'agent:main:reports',
      enabled: true,
      wakeMode: 'now',
      schedule: { kind: 'cron', expr: '0 3 * * *', tz: 'UTC' },
      state: { nextRunAtMs: expect.any(Number) },
    });
    expect(new Date(job.nextRunAtMs).getUTCHours()).toBe(3);

    const ran = await client.call<any>('cron.run', { id: job.id });
    expect(ran).toMatchObject({ ok: true, ran: true, status: 'ok', workItemId: expect.any(String) });
    const { items } = await client.call<{ items: any[] }>('work.list', { sessionKey: 'agent:main:reports' });
    expect(items.find((item) => item.id === ran.workItemId)).toMatchObject({
      title: 'Nightly digest',
      description: 'Summarise the day.',
      source: `cron:${job.id}`,
    });

    const listed = await client.call<any>('cron.list', {});
    expect(listed).toMatchObject({ total: 1, hasMore: false });
    expect(listed.jobs[0]).toMatchObject({ id: job.id, lastRunStatus: 'ok', lastWorkItemId: ran.workItemId });
    expect(await client.call('cron.remove', { jobId: job.id })).toEqual({
      ok: true,
      removed: true,
      id: job.id,
    });
    expect((await client.call<any>('cron.list', {})).jobs).toEqual([]);
  });

  it('a cron agentTurn job sends a chat message the local model answers', async () => {
    const job = await client.call<any>('cron.add', {
      name: 'check-in',
      schedule: { kind: 'every', everyMs: 3_600_000 },
      sessionTarget: 'isolated',
      payload: { kind: 'agentTurn', message: 'Time for the hourly check-in.' },
    });
    expect(job.sessionKey).toBe('agent:main:cron-check-in');
    await client.call('chat.history', { sessionKey: job.sessionKey });
    const ran = await client.call<any>('cron.run', { id: job.id });
    const events = await collectRun(client, ran.runId);
    expect(events.at(-1)!.payload.state).toBe('final');
    const history = await client.call<any>('chat.history', { sessionKey: job.sessionKey });
    expect(history.messages[0]).toMatchObject({ role: 'user', content: 'Time for the hourly check-in.' });
    await client.call('cron.remove', { id: job.id });
  });

  it('refuses bad cron input with stable codes', async () => {
    const bad = (params: Record<string, unknown>) =>
      client.call('cron.add', params).catch((error: unknown) => error);
    const base = { name: 'x', payload: { kind: 'agentTurn', message: 'hi' } };
    expect(await bad({ ...base, schedule: { kind: 'cron', expr: '61 * * * *' } })).toMatchObject({
      code: 'INVALID_REQUEST',
      details: { code: 'CRON_INVALID_SCHEDULE' },
    });
    expect(await bad({ ...base, schedule: { kind: 'every', everyMs: 10 } })).toMatchObject({
      code: 'INVALID_REQUEST',
    });
    expect(
      await bad({ ...base, schedule: { kind: 'every', everyMs: 1000 }, wakeMode: 'next-heartbeat' }),
    ).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(
      await bad({
        ...base,
        schedule: { kind: 'every', everyMs: 1000 },
        payload: { kind: 'systemEvent', text: 'x' },
      }),
    ).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(
      await bad({ ...base, schedule: { kind: 'every', everyMs: 1000 }, sessionTarget: 'session:agent:x' }),
    ).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(
      await client.call('cron.run', { id: 'cron_missing' }).catch((error: unknown) => error),
    ).toMatchObject({
      code: 'NOT_FOUND',
    });
    expect(await client.call('cron.remove', {}).catch((error: unknown) => error)).toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });

  it('logs.tail answers agentd own recent log lines, redacted, and follows a cursor', async () => {
    const token = started.runtime.state.token;
    started.runtime.logger.warn({ leaked: `token=${token}` }, 'a line that mentions the gateway token');
    const tail = await client.call<any>('logs.tail', { limit: 50 });
    expect(tail).toMatchObject({
      file: expect.any(String),
      cursor: expect.any(Number),
      size: expect.any(Number),
    });
    const line = tail.lines.find((entry: string) => entry.includes('mentions the gateway token'));
    expect(line).toBeDefined();
    expect(line).toContain('[REDACTED]');
    expect(tail.lines.join('\n')).not.toContain(token);
    started.runtime.logger.info({}, 'after the cursor');
    const next = await client.call<any>('logs.tail', { cursor: tail.cursor });
    expect(next.lines.some((entry: string) => entry.includes('after the cursor'))).toBe(true);
    expect(next.lines.some((entry: string) => entry.includes('mentions the gateway token'))).toBe(false);
    expect(await client.call('logs.tail', { limit: 0 }).catch((error: unknown) => error)).toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });

  it('channels.status says honestly that agentd has no connectors', async () => {
    const status = await client.call<any>('channels.status', {});
    expect(status).toEqual({
      ts: expect.any(Number),
      channelOrder: [],
      channelLabels: {},
      channels: {},
      channelAccounts: {},
      channelDefaultAccountId: {},
    });
    expect(
      await client.call('channels.status', { channel: 'telegram' }).catch((error: unknown) => error),
    ).toMatchObject({ code: 'NOT_FOUND' });
  });
});
