-- Rows of ingest_routes whose name is not a route name (an older version let 'x-y\n' in): moved here at start-up with
-- the ref rows of 0101, so that ListRoutes and kb routes never print them (services/common/setaside.py). A route that
-- pull requests refer to stays where it is, and is counted as set aside all the same.
CREATE TABLE ingest_routes_set_aside (
    route        text NOT NULL,
    owner        text NOT NULL,
    started_by   text NOT NULL,
    base_sha     text NOT NULL,
    started_at   timestamptz NOT NULL,
    reason       text NOT NULL,
    set_aside_at timestamptz NOT NULL DEFAULT now()
);
