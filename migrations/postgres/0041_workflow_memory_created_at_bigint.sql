-- A workflow memory item's created_at is the engine clock's milliseconds since 1970, which INTEGER (32 bits)
-- cannot hold: every add to a durable memory store failed on Postgres with "out of range for type integer".
ALTER TABLE workflow_memory ALTER COLUMN created_at TYPE BIGINT;
