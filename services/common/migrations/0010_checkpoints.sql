-- How far the relay has published the log to each JetStream stream (advanced only after JetStream acked).
CREATE TABLE relay_checkpoints (
    stream     text        PRIMARY KEY,
    position   bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- How far each named consumer has applied the log; written in the same transaction as the consumer's effects.
CREATE TABLE consumer_checkpoints (
    consumer   text        PRIMARY KEY,
    position   bigint      NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);
