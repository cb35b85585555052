-- The board's projection of the event log (services/board/projection.py), kept so that a restart resumes from its
-- checkpoint instead of replaying the log. Derived data: Rebuild replaces all of it from position 0.

-- The checkpoint and the projection's globals (route owners, agents, "now"), one row, written in the same
-- transaction as the rows below, so the stored projection always matches exactly the events up to `position`.
CREATE TABLE board_checkpoint (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    position  bigint  NOT NULL,                 -- the last event folded in
    globals   bytea   NOT NULL                  -- projection.globals_to_json
);

-- One row per board (route = '') and one per route on a board: a check rewrites its route's row, not the board.
CREATE TABLE board_rows (
    version integer NOT NULL CHECK (version > 0),
    route   text    NOT NULL,
    state   bytea   NOT NULL,                   -- projection.board_to_json / projection.route_to_json
    PRIMARY KEY (version, route)
);
