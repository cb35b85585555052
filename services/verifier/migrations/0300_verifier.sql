-- The verifier's durable work queue and the rules it judges by.

-- One row per check to run: a route or job commit x a check named in the rules at the tag `checks`.
-- Claimed with SELECT ... FOR UPDATE SKIP LOCKED under a lease that the running worker renews; a worker that dies
-- stops renewing, its lease expires and any worker claims the check again.
CREATE TABLE verifier_checks (
    check_id          uuid        PRIMARY KEY,     -- uuid5 of dedupe_key: a redelivered commit computes the same id
    dedupe_key        text        NOT NULL UNIQUE, -- route, sha, check name, rules commit
    check_name        text        NOT NULL,
    ref               text        NOT NULL,
    sha               text        NOT NULL,
    route             text        NOT NULL,
    kind              smallint    NOT NULL,        -- events.proto CommitKind
    job_id            text        NOT NULL DEFAULT '',
    rules_commit      text        NOT NULL,
    benchmark_version integer     NOT NULL,
    script            text        NOT NULL,        -- checks/<...> in the rules commit
    metrics_file      text        NOT NULL,
    time_limit_s      integer     NOT NULL CHECK (time_limit_s >= 1),
    trigger_event_id  uuid        NOT NULL,        -- the CommitIngested it answers
    state             text        NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'passed', 'failed')),
    attempts          integer     NOT NULL DEFAULT 0,
    claimed_by        text,
    lease_expires_at  timestamptz,
    heartbeat_at      timestamptz,
    enqueued_at       timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz,
    completed_position bigint,                     -- global position of its CheckCompleted
    CHECK ((state = 'running') = (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL))
);
-- The claim's scan: oldest open work first.
CREATE INDEX verifier_checks_open ON verifier_checks (enqueued_at, check_id) WHERE state IN ('queued', 'running');
CREATE INDEX verifier_checks_route ON verifier_checks (route, enqueued_at);
CREATE INDEX verifier_checks_sha ON verifier_checks (sha);

-- The rules at the tag `checks`, as the last RulesApproved the verifier's consumer applied said.
CREATE TABLE verifier_rules (
    singleton         boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    rules_commit      text        NOT NULL,
    benchmark_version integer     NOT NULL,
    rules_json        text        NOT NULL,
    position          bigint      NOT NULL,        -- the RulesApproved event's global position
    updated_at        timestamptz NOT NULL DEFAULT now()
);
