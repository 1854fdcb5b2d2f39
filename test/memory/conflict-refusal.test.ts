import { describe, expect, it, vi } from 'vitest';
import type { SqlDatabase, SqlExecutor } from '../../src/store/index.js';
import { ErrorCodes, SystemError } from '../../src/util/index.js';
import { describeEachDatabase, openTestDatabase } from '../helpers/databases.js';
import { createHarness, sessionRef } from './memory-fixtures.js';

const refused = () =>
  new SystemError({ code: ErrorCodes.conflict, message: 'the row is not as expected', retryable: true });

async function expectRefused(db: SqlDatabase, also: (tx: SqlExecutor) => Promise<void>): Promise<void> {
  const { memory } = createHarness(db);
  const ref = sessionRef();
  await memory.append(ref, { role: 'user', content: 'stored' });
  // Without requireCommit a commit that failed for the database would be queued to be written later.
  await expect(memory.append(ref, { role: 'assistant', content: 'refused' }, also)).rejects.toMatchObject({
    code: 'CONFLICT',
  });
  expect(memory.status()).toMatchObject({ degraded: false, pendingWrites: 0 });
  expect((await memory.history(ref.sessionKey)).map((entry) => entry.content)).toEqual(['stored']);
  expect((await memory.load(ref)).map((entry) => entry.content)).toEqual(['stored']);
  // The next append takes the id the refused one did not use.
  const next = await memory.append(ref, { role: 'assistant', content: 'next' });
  expect(next.memoryId).toBe(2);
  expect((await memory.history(ref.sessionKey)).map((entry) => entry.content)).toEqual(['stored', 'next']);
}

describeEachDatabase('a memory commit refused by a conflict', (getDb) => {
  it('fails with it, stores nothing, queues nothing and leaves memory writable', () =>
    expectRefused(getDb(), async () => {
      throw refused();
    }));

  it('queued while memory was degraded, is dropped when written through, and memory recovers', async () => {
    const { memory, bus } = createHarness(getDb(), { config: { writeRetryMs: 5 } });
    const errors: string[] = [];
    bus.on('system:error', (event) => errors.push(event.data.message));
    const ref = sessionRef();
    await memory.append(ref, { role: 'user', content: 'stored' });
    memory.reportWriteFailure(new Error('disk I/O error'));
    // Queued in RAM while degraded; its caller's statement refuses it once it is written through.
    await memory.append(ref, { role: 'assistant', content: 'queued' }, async (tx) => {
      await tx.run('SELECT 1');
      throw refused();
    });
    expect(memory.status()).toMatchObject({ degraded: true, pendingWrites: 1 });
    await vi.waitFor(() => expect(memory.status()).toMatchObject({ degraded: false, pendingWrites: 0 }), {
      timeout: 5000,
    });
    expect(errors.some((message) => message.includes('could not be written through'))).toBe(true);
    expect((await memory.history(ref.sessionKey)).map((entry) => entry.content)).toEqual(['stored']);
    await memory.append(ref, { role: 'assistant', content: 'after' });
    expect((await memory.history(ref.sessionKey)).map((entry) => entry.content)).toEqual(['stored', 'after']);
  });
});

// On SQLite `also` runs inside the transaction and may refuse on a statement's answer, as the chat turn's
// markRunning does; on Postgres the answers come once the commit is stored.
describe('a memory commit on SQLite refused on an answer inside its transaction', () => {
  it('fails with the conflict and stores nothing', async () => {
    const db = await openTestDatabase('sqlite');
    try {
      await expectRefused(db, async (tx) => {
        const { changes } = await tx.run(
          "UPDATE memory_entries SET state = state WHERE session_key = 'none'",
        );
        if (changes === 0) throw refused();
      });
    } finally {
      await db.close();
    }
  });
});
