-- Events the relay could not publish (larger than the NATS server's max_payload): skipped on the
-- bus so that the relay goes on, still in the log, where consumers read them (their gap repair). One row per event
-- and JetStream stream; kb_relay_skipped_events counts them, and KernelboardRelaySkippedEvents alerts on a new one.
CREATE TABLE relay_skipped (
    stream          text        NOT NULL,
    global_position bigint      NOT NULL,
    event_id        uuid        NOT NULL,
    type            text        NOT NULL,
    bytes           integer     NOT NULL,
    limit_bytes     integer     NOT NULL,
    skipped_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stream, global_position)
);
