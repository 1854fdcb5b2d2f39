-- Postgres's 0033 announces sessions that stop being active to the processes sharing the database. A SQLite
-- connection learns that another one committed from PRAGMA data_version; this file keeps the two dialects'
-- version numbers in step and changes nothing.
SELECT 1;
