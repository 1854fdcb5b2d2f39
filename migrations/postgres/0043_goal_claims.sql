-- Goals being planned under an idempotency key (src/agents/goal-claims.ts, docs/agents.md "Idempotency
-- keys"). A retry sent to another process on the same database while the first still plans (a client that
-- timed out behind a load balancer) found no plan yet and planned the goal twice. The planning process now
-- claims the key first and holds the claim, renewed, until its answer's tasks are written; another process
-- waits for it instead, and takes the claim over once its holder's lease lapsed unrenewed (it died).
CREATE TABLE goal_claims (
  session_key TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  goal TEXT NOT NULL,
  owner_id TEXT NOT NULL,
  held_until BIGINT NOT NULL,
  PRIMARY KEY (session_key, idempotency_key)
);
CREATE INDEX goal_claims_by_owner ON goal_claims (owner_id);
