-- Sessions that stop being active (archived, or deleted while active) are announced on the NOTIFY channel
-- agentd_session_ends (src/store/store.ts, docs/storage.md).
--
-- A chat turn asks for its session's active instance on every message. On SQLite the session store keeps the
-- ids it read and reads again only after another connection committed (PRAGMA data_version); on Postgres it
-- could not know and read the row on every turn, one of a turn's three round trips. With these triggers a
-- store that LISTENs hears every end, whoever wrote it, and keeps the ids while it hears. The triggers fire
-- only when a status changes or a row goes, never on a turn's own updates (they do not set the status), and
-- Postgres delivers one notification for a transaction's identical ones.
CREATE FUNCTION sessions_announce_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agentd_session_ends', '');
  RETURN NULL;
END;
$$;
CREATE TRIGGER sessions_announce_archive AFTER UPDATE OF status ON sessions
  FOR EACH ROW WHEN (OLD.status = 'active' AND NEW.status IS DISTINCT FROM 'active')
  EXECUTE FUNCTION sessions_announce_end();
CREATE TRIGGER sessions_announce_delete AFTER DELETE ON sessions
  FOR EACH ROW WHEN (OLD.status = 'active')
  EXECUTE FUNCTION sessions_announce_end();
