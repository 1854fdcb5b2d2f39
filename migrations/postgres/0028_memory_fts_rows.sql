-- SQLite's 0028 defines the rows of its full-text index once, in a view. Postgres's index is the generated
-- search_vector column (0002); this file keeps the two dialects' version numbers in step and changes nothing.
SELECT 1;
