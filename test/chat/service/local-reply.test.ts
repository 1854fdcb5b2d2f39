import { describe, expect, it } from 'vitest';
import { runLocalReply } from '../../../src/chat/service/local-reply.js';
import { newRecord } from '../../../src/chat/service/records.js';
import { createRecordingLogger, ErrorCodes, SystemError, UserInputError } from '../../../src/util/index.js';
import { fakeContext } from './context.js';

const ref = { sessionId: 'session-1', sessionKey: 'agent:main:main', agentId: 'main' };

describe('chat step: local reply', () => {
  it('appends the reply, touches the session and publishes started, delta and a completed final', async () => {
    const { ctx, calls, events } = fakeContext();
    const record = newRecord(ctx, 'run-1', ref.sessionKey, ref.agentId);
    await runLocalReply(ctx, record, ref, async () => 'Stopped 1 run(s).');
    expect(record).toMatchObject({
      status: 'completed',
      text: 'Stopped 1 run(s).',
      assistantMemoryId: 'mem:1',
    });
    expect(calls[0]).toEqual([
      'memory.append',
      ref,
      { role: 'assistant', content: 'Stopped 1 run(s).', metadata: { runId: 'run-1', command: true } },
    ]);
    expect(calls[1]?.[0]).toBe('sessions.touch');
    expect(events.map((event) => event.type)).toEqual(['run:started', 'run:text-delta', 'run:finished']);
    expect(events[2]?.data).toMatchObject({ status: 'completed', text: 'Stopped 1 run(s).', turns: 0 });
  });

  it('keeps a user error code, writes nothing, logs nothing and publishes an error final', async () => {
    const { ctx, calls, events } = fakeContext();
    const logger = createRecordingLogger();
    Object.assign(ctx, { logger });
    const record = newRecord(ctx, 'run-1', ref.sessionKey, ref.agentId);
    await runLocalReply(ctx, record, ref, async () => {
      throw new UserInputError({ code: ErrorCodes.invalidRequest, message: 'Usage: /goal <what>' });
    });
    expect(record.status).toBe('error');
    expect(record.error).toEqual({
      code: 'INVALID_REQUEST',
      message: 'Usage: /goal <what>',
      retryable: false,
    });
    expect(calls).toEqual([]);
    expect(events.map((event) => event.type)).toEqual(['run:started', 'run:finished']);
    expect(logger.records).toEqual([]);
  });

  it("keeps the code of agentd's own errors, whoever's fault, and logs what is not the caller's", async () => {
    const { ctx } = fakeContext();
    const logger = createRecordingLogger();
    Object.assign(ctx, { logger });
    const unavailable = new SystemError({
      code: ErrorCodes.storeUnavailable,
      message: 'gone',
      retryable: true,
    });
    const record = newRecord(ctx, 'run-1', ref.sessionKey, ref.agentId);
    await runLocalReply(ctx, record, ref, async () => {
      throw unavailable;
    });
    expect(record.error).toEqual({ code: 'STORE_UNAVAILABLE', message: 'gone', retryable: true });
    expect(logger.records).toMatchObject([{ level: 'error', object: { err: unavailable, runId: 'run-1' } }]);
  });

  it('reports any other failure as INTERNAL without its message, which goes to the log', async () => {
    const { ctx } = fakeContext();
    const logger = createRecordingLogger();
    Object.assign(ctx, { logger });
    const record = newRecord(ctx, 'run-1', ref.sessionKey, ref.agentId);
    await runLocalReply(ctx, record, ref, async () => {
      throw new Error('ENOENT: /home/alice/.agentd/planner.db');
    });
    expect(record.error).toEqual({
      code: 'INTERNAL',
      message: 'the command failed inside agentd; see the server log',
      retryable: false,
    });
    expect(logger.records).toHaveLength(1);
    expect(logger.records[0]?.object.err).toMatchObject({
      message: 'ENOENT: /home/alice/.agentd/planner.db',
    });
  });
});
