-- Issues, comments (on issues and pull requests) and join requests, written in the same transaction as their events.
CREATE TABLE ingest_issues (
    number       bigserial PRIMARY KEY,
    title        text NOT NULL,
    body         text NOT NULL,
    author       text NOT NULL,
    author_owner text NOT NULL,        -- the person the author acts for: they may close and reopen it too
    state        text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
    closed_by    text,
    opened_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ingest_comments (
    id           bigserial PRIMARY KEY,
    issue_number bigint REFERENCES ingest_issues (number),
    pull_number  bigint REFERENCES ingest_pulls (number),
    body         text NOT NULL,
    author       text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((issue_number IS NULL) <> (pull_number IS NULL))
);

-- Lists page by id (the cursor), per thread.
CREATE INDEX ingest_comments_issue ON ingest_comments (issue_number, id) WHERE issue_number IS NOT NULL;
CREATE INDEX ingest_comments_pull ON ingest_comments (pull_number, id) WHERE pull_number IS NOT NULL;

CREATE TABLE ingest_join_requests (
    id            bigserial PRIMARY KEY,
    name          text NOT NULL REFERENCES principals (name),
    note          text NOT NULL,
    state         text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'accepted', 'declined')),
    decided_by    text,
    decision_note text NOT NULL DEFAULT '',
    requested_at  timestamptz NOT NULL DEFAULT now(),
    decided_at    timestamptz
);

-- One pending request per person; a declined person may ask again later.
CREATE UNIQUE INDEX ingest_join_requests_pending ON ingest_join_requests (name) WHERE state = 'pending';
CREATE INDEX ingest_join_requests_state ON ingest_join_requests (state, id);
