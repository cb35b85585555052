-- The append-only event log (DESIGN.md: the single source of truth).

CREATE TABLE events (
    global_position  bigint      PRIMARY KEY,
    event_id         uuid        NOT NULL UNIQUE,
    stream           text        NOT NULL CHECK (stream <> ''),
    stream_version   bigint      NOT NULL CHECK (stream_version >= 1),
    type             text        NOT NULL,
    payload          bytea       NOT NULL,            -- the serialized payload message (not the envelope)
    occurred_at      timestamptz NOT NULL,
    actor            text        NOT NULL,
    verifier_version integer,
    recorded_at      timestamptz NOT NULL DEFAULT now(),
    -- The serialized Event envelope without stream_version, global_position and the payload's bytes, ending with
    -- the payload field's tag and length: envelope_head || payload parses as the envelope. Written once with the
    -- row (it cannot drift: rows never change), it lets readers decode with one protobuf parse per event.
    envelope_head    bytea       NOT NULL,
    UNIQUE (stream, stream_version)
);
-- read_all(types=...) for consumers that follow a few event types.
CREATE INDEX events_type_position ON events (type, global_position);

-- Why a counter row and not bigserial: sequence values are handed out at INSERT but become visible at COMMIT, so a
-- reader can see position 8 committed while 7 is still in flight and then move past 7 for good. Here every append
-- locks this single row (SELECT ... FOR UPDATE) before it takes positions, and holds the lock until it commits or
-- rolls back. The next appender waits on that lock, and PostgreSQL releases it only after the first transaction is
-- visible to new snapshots, so positions become visible in exactly increasing order: whatever snapshot sees position
-- p also sees every position below p. A rollback also rolls the counter back, so positions stay dense (1, 2, 3...).
-- The price: appends are serialized for the length of the appending transaction (batch to go fast; in a caller's
-- transaction, append last and commit soon).
CREATE TABLE event_log_head (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    position  bigint  NOT NULL                    -- the last committed global_position, 0 for an empty log
);
INSERT INTO event_log_head (position) VALUES (0);

-- Appends n events to a stream in one statement (one round trip; the lock is held only for this call plus the
-- commit). Each statement of a VOLATILE plpgsql function takes a fresh snapshot under READ COMMITTED, so the stream
-- version is read after the lock is granted and sees the previous appender's rows.
-- Returns first_position NULL on a version conflict (nothing written), with actual_version and any of the given
-- event ids that already exist (a retried append whose first attempt committed).
CREATE FUNCTION kb_append_events(
    p_stream text, p_expected_version bigint, p_event_ids uuid[], p_types text[], p_payloads bytea[],
    p_occurred_at timestamptz[], p_actors text[], p_verifier_versions integer[], p_envelope_heads bytea[],
    OUT first_position bigint, OUT actual_version bigint, OUT duplicate_ids uuid[])
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n integer := cardinality(p_event_ids);
BEGIN
    PERFORM 1 FROM event_log_head FOR UPDATE;
    SELECT coalesce(max(stream_version), 0) INTO actual_version FROM events WHERE stream = p_stream;
    IF p_expected_version IS NOT NULL AND p_expected_version <> actual_version THEN
        SELECT array_agg(event_id) INTO duplicate_ids FROM events WHERE event_id = ANY (p_event_ids);
        RETURN;
    END IF;
    UPDATE event_log_head SET position = position + n RETURNING position - n + 1 INTO first_position;
    INSERT INTO events (global_position, event_id, stream, stream_version, type, payload, occurred_at, actor,
                        verifier_version, envelope_head)
    SELECT first_position + i - 1, e, p_stream, actual_version + i, t, p, o, a, v, h
    FROM unnest(p_event_ids, p_types, p_payloads, p_occurred_at, p_actors, p_verifier_versions, p_envelope_heads)
         WITH ORDINALITY AS x(e, t, p, o, a, v, h, i);
END
$$;

-- Append-only, enforced here rather than trusted to every client.
CREATE FUNCTION kb_events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the event log is append-only: % on events is refused', TG_OP
        USING ERRCODE = 'KB001', HINT = 'append a compensating event instead';
END
$$;
CREATE TRIGGER events_no_update_delete BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION kb_events_refuse_change();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION kb_events_refuse_change();

-- Wakes the relay (LISTEN kb_events_appended) as soon as an append commits; NOTIFY is delivered at commit and
-- repeated notifications in one transaction collapse into one.
CREATE FUNCTION kb_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kb_events_appended', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION kb_events_notify();
