-- Rows of ingest_refs that the start-up reconcile could not apply to git (an ill-formed ref name written by an older
-- version, a commit missing from the repository): moved here so that ingest starts without them (services/common/
-- setaside.py). An operator looks at them, then repairs or deletes them.
CREATE TABLE ingest_refs_set_aside (
    ref         text NOT NULL,
    sha         text NOT NULL,
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL,
    reason      text NOT NULL,
    set_aside_at timestamptz NOT NULL DEFAULT now()
);
