-- A session's end is announced with the schema of its table as the payload (0033 sent none). Stores of
-- several schemas in one database (tenants, test runs) share the channel agentd_session_ends, and each
-- treated every other schema's ends as its own: it forgot the ids it kept and read its sessions' rows again.
-- A store now counts an announcement only when it names the store's own schema.
CREATE OR REPLACE FUNCTION sessions_announce_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agentd_session_ends', TG_TABLE_SCHEMA);
  RETURN NULL;
END;
$$;
