import type { ChatInbox, PendingMessage } from '../../src/chat/index.js';
import { createKvStore, createSessionStore, type SqlDatabase } from '../../src/store/index.js';

/**
 * A chat inbox on `db` as the runtime keeps it: pending messages in the `kv` table (namespace `inbox`), runs in
 * progress on their sessions' rows.
 */
export function inboxOn(db: SqlDatabase): ChatInbox {
  const kv = createKvStore(db);
  const sessions = createSessionStore(db);
  return {
    put: (message) => kv.set('inbox', message.runId, JSON.stringify(message)),
    delete: async (runId, tx) => {
      await kv.delete('inbox', runId, tx);
    },
    list: async () => (await kv.list('inbox')).map((entry) => JSON.parse(entry.value) as PendingMessage),
    markRunning: (run, tx) => sessions.markRunning(run.sessionId, run, run.activity, tx),
    markEnded: (run, tx) => sessions.markEnded(run.sessionKey, run.runId, run.activity, tx),
    markEndedWithoutReply: (run, tx) => sessions.markEndedWithoutReply(run, tx),
    listRunning: () => sessions.listRunning(),
    listUnreplied: () => sessions.listUnrepliedRuns(),
  };
}
