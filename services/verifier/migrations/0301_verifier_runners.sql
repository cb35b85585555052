-- Checks on the maintainers' runners (issue 40): where a check runs, whose it is for fairness, and its Slurm job.

ALTER TABLE verifier_checks
    ADD COLUMN owner          text        NOT NULL DEFAULT '',  -- the person the push was for (CommitIngested.owner)
    ADD COLUMN partition      text        NOT NULL DEFAULT '',  -- checks[].partition: '' runs on the verifier's host
    ADD COLUMN gres           text        NOT NULL DEFAULT '',  -- checks[].gres
    ADD COLUMN supersede      boolean     NOT NULL DEFAULT false,
    ADD COLUMN slurm_job_id   text,                             -- the running attempt's Slurm job
    ADD COLUMN runner_node    text,                             -- the node Slurm runs it on, once running
    ADD COLUMN dispatched_at  timestamptz,                      -- the running attempt's sbatch
    ADD COLUMN running_at     timestamptz,                      -- ... and when Slurm started it
    ADD COLUMN lost_on        text[]      NOT NULL DEFAULT '{}'; -- nodes an attempt was lost on: the next runs elsewhere
-- The dispatcher's scan: queued checks of a partition; and a route's queued checks (supersede).
CREATE INDEX verifier_checks_dispatch ON verifier_checks (partition, owner, enqueued_at) WHERE state = 'queued';
