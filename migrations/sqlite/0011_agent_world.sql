-- Where each agent stands in the shared 2D world; moved by clients and by the agent's own decision loop.
ALTER TABLE agents ADD COLUMN position_x REAL;
ALTER TABLE agents ADD COLUMN position_y REAL;
