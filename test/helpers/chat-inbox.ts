import type { ChatInbox, PendingMessage, RunningRun } from '../../src/chat/index.js';
import { createKvStore, type SqlDatabase } from '../../src/store/index.js';

/** A chat inbox on the `kv` table of `db`, as the runtime keeps it (namespaces `inbox` and `running`). */
export function inboxOn(db: SqlDatabase): ChatInbox {
  const kv = createKvStore(db);
  return {
    put: (message) => kv.set('inbox', message.runId, JSON.stringify(message)),
    delete: async (runId) => {
      await kv.delete('inbox', runId);
    },
    list: async () => (await kv.list('inbox')).map((entry) => JSON.parse(entry.value) as PendingMessage),
    markRunning: (run) => kv.set('running', run.runId, JSON.stringify(run)),
    markEnded: async (runId) => {
      await kv.delete('running', runId);
    },
    listRunning: async () => (await kv.list('running')).map((entry) => JSON.parse(entry.value) as RunningRun),
  };
}
