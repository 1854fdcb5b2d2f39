-- The leases of the processes that serve chat on this database (src/store/chat-owners.ts, docs/storage.md
-- "Crash windows in a chat turn"). A chat run's mark and a waiting message name their process (migration
-- 0049); a process of this host is seen alive by its pid, but one of another host sharing a Postgres database
-- cannot be seen: it renews its lease here every third of its length, by the database's clock (so hosts'
-- clocks do not have to agree), and deletes it when it stops. A start leaves another host's runs and messages
-- to it while its lease holds, and a sweep takes them once it lapsed.
CREATE TABLE chat_owners (
  owner_id TEXT PRIMARY KEY,
  alive_until INTEGER NOT NULL
);
