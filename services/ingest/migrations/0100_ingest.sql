-- The ingest service's state, written in the same transaction as the events that record it.
-- ingest_refs is the truth for every hosted ref; the git refs follow it (reconciled at start).
CREATE TABLE ingest_refs (
    ref         text PRIMARY KEY,
    sha         text NOT NULL CHECK (sha ~ '^[0-9a-f]{40}$'),
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ingest_routes (
    route       text PRIMARY KEY,
    owner       text NOT NULL,
    started_by  text NOT NULL,
    base_sha    text NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ingest_pulls (
    number      bigserial PRIMARY KEY,
    route       text NOT NULL REFERENCES ingest_routes (route),
    head_sha    text NOT NULL,
    base_ref    text NOT NULL,
    title       text NOT NULL,
    author      text NOT NULL,
    state       text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'merged')),
    merge_sha   text,
    merged_by   text,
    opened_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ingest_reviews (
    id          bigserial PRIMARY KEY,
    number      bigint NOT NULL REFERENCES ingest_pulls (number),
    verdict     integer NOT NULL,
    body        text NOT NULL,
    reviewer    text NOT NULL,
    reviewed_at timestamptz NOT NULL DEFAULT now()
);
