-- SQLite's 0027 writes its full-text index in batches instead of by a trigger in every commit. Postgres's
-- index is the generated search_vector column and its GIN index (0002), kept by Postgres itself; this file
-- keeps the two dialects' version numbers in step and changes nothing.
SELECT 1;
