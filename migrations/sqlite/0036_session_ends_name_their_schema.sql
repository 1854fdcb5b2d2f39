-- Postgres's 0036 names the schema in its announcements of sessions' ends. SQLite announces nothing (PRAGMA
-- data_version tells a connection that another committed); this file keeps the two dialects' version numbers
-- in step and changes nothing.
SELECT 1;
