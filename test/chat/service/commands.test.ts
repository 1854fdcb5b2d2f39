import { describe, expect, it } from 'vitest';
import { builtInCommand } from '../../../src/chat/service/commands.js';
import { newRecord } from '../../../src/chat/service/records.js';
import { fakeContext } from './context.js';

const ref = { sessionId: 'session-1', sessionKey: 's', agentId: 'main' };

describe('chat step: slash commands', () => {
  it('/new archives the session and says where the old conversation went', async () => {
    const { ctx } = fakeContext({ activeSession: 'old-session' });
    const record = newRecord(ctx, 'run-1', 's', 'main');
    const reply = builtInCommand(ctx, 'new', '', record, ref, new AbortController().signal);
    await expect(reply?.()).resolves.toBe(
      'Started a new session. The previous conversation (old-session) is archived and can still be recalled.',
    );
  });

  it('/compact reports the figures, or that there was nothing to compact', async () => {
    const { ctx } = fakeContext({ summarized: [1] });
    const record = newRecord(ctx, 'run-1', 's', 'main');
    const reply = builtInCommand(ctx, 'compact', '', record, ref, new AbortController().signal);
    await expect(reply?.()).resolves.toBe('Compacted the session: 10 → 4 active entries, 100 → 40 tokens.');
    const { ctx: empty } = fakeContext();
    await expect(
      builtInCommand(empty, 'compact', '', record, ref, new AbortController().signal)?.(),
    ).resolves.toBe('Nothing to compact yet.');
  });

  it('hands other names to slashCommands with the run and session, and knows no others', async () => {
    const seen: unknown[] = [];
    const { ctx } = fakeContext({
      slashCommands: {
        goal: async (input) => {
          seen.push(input);
          return 'planned';
        },
      },
    });
    const record = newRecord(ctx, 'run-1', 's', 'main');
    const signal = new AbortController().signal;
    await expect(builtInCommand(ctx, 'goal', 'ship it', record, ref, signal)?.()).resolves.toBe('planned');
    expect(seen).toEqual([{ argument: 'ship it', sessionKey: 's', agentId: 'main', runId: 'run-1', signal }]);
    expect(builtInCommand(ctx, 'unknown', '', record, ref, signal)).toBeUndefined();
  });
});
