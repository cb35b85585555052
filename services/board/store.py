"""PostgreSQL adapter: the projection's rows and its checkpoint (migrations/0400), always written together."""

from services.board import codec
from services.board.state import State


async def load(conn) -> State | None:
    """The stored projection; None when nothing was stored yet or it was folded by another projection version."""
    checkpoint = await conn.fetchrow("SELECT position, globals FROM board_checkpoint")
    if checkpoint is None:
        return None
    rows = await conn.fetch("SELECT version, route, state FROM board_rows ORDER BY version, route")
    boards = [row["state"] for row in rows if row["route"] == ""]
    routes = [(row["version"], row["route"], row["state"]) for row in rows if row["route"] != ""]
    try:
        return codec.state_from_json(checkpoint["globals"], boards, routes)
    except codec.StaleProjection:
        return None


async def stored_position(conn) -> int:
    return await conn.fetchval("SELECT position FROM board_checkpoint") or 0


async def write_changes(conn, state: State) -> None:
    """The rows the fold touched since the last write, and the checkpoint; call inside the caller's transaction."""
    rows = [(v, "", codec.board_to_json(state.boards[v])) for v in sorted(state.touched_boards)]
    rows += [(v, r, codec.route_to_json(state.boards[v].routes[r])) for v, r in sorted(state.touched_routes)]
    if rows:
        await conn.executemany(
            "INSERT INTO board_rows (version, route, state) VALUES ($1, $2, $3)"
            " ON CONFLICT (version, route) DO UPDATE SET state = excluded.state",
            rows,
        )
    await _write_checkpoint(conn, state)
    state.touched_boards.clear()
    state.touched_routes.clear()


async def replace(conn, state: State) -> None:
    """Every row replaced by ``state``'s (a rebuild, or a live write that was lost); inside a transaction."""
    globals_json, boards, routes = codec.state_rows(state)
    records = [(v, "", data) for v, data in zip(sorted(state.boards), boards, strict=True)] + routes
    await conn.execute("DELETE FROM board_rows")
    await conn.copy_records_to_table("board_rows", records=records, columns=("version", "route", "state"))
    await _write_checkpoint(conn, state, globals_json)
    state.touched_boards.clear()
    state.touched_routes.clear()


async def _write_checkpoint(conn, state: State, globals_json: bytes | None = None) -> None:
    await conn.execute(
        "INSERT INTO board_checkpoint (singleton, position, globals) VALUES (true, $1, $2)"
        " ON CONFLICT (singleton) DO UPDATE SET position = excluded.position, globals = excluded.globals",
        state.position,
        globals_json if globals_json is not None else codec.globals_to_json(state),
    )
