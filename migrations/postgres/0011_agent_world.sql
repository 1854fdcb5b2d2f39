-- Where each agent stands in the shared 2D world; moved by clients and by the agent's own decision loop.
ALTER TABLE agents ADD COLUMN position_x DOUBLE PRECISION;
ALTER TABLE agents ADD COLUMN position_y DOUBLE PRECISION;
