-- A pull request's body (kb pr open --body) and the person its author acts for: that person and their agents may
-- comment on their own pull request but not approve it (contracts/access.py, APPROVE_PULL).
ALTER TABLE ingest_pulls ADD COLUMN body text NOT NULL DEFAULT '';
ALTER TABLE ingest_pulls ADD COLUMN author_owner text;
UPDATE ingest_pulls SET author_owner = split_part(author, '/', 1);  -- agents are named <person>/<agent>
ALTER TABLE ingest_pulls ALTER COLUMN author_owner SET NOT NULL;
