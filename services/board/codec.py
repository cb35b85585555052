"""The projection's state as canonical JSON (the board's stored rows, and the determinism tests): equal states give
equal bytes. Each board and each (board, route) is its own row, so that a check rewrites one route, not the whole
board; a row stored by another PROJECTION_VERSION is refolded rather than read."""

import json
from collections.abc import Iterable

from services.board import projection
from services.board.state import Board, Card, Entry, RouteInfo, RouteOnBoard, State


class StaleProjection(ValueError):
    """A stored state folded by another PROJECTION_VERSION."""


def _dumps(data) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def board_to_json(board: Board) -> bytes:
    """A board without its routes (each route is its own row: a check rewrites one route, not the whole board)."""
    return _dumps(
        {
            "version": board.version,
            "card": board.card,
            "status": board.status,
            "status_reason": board.status_reason,
            "started_ns": board.started_ns,
            "last_active_ns": board.last_active_ns,
            "last_scored_ns": board.last_scored_ns,
            "actors": board.actors,
        }
    )


def board_from_json(data: bytes) -> Board:
    raw = json.loads(data)
    board = Board(raw["version"], raw["started_ns"])
    card = raw["card"]
    if card is not None:
        card[4] = tuple(card[4])
        card[6] = tuple(card[6])
        card[7] = tuple(tuple(pair) for pair in card[7])
        board.card = Card(*card)
    board.status = raw["status"]
    board.status_reason = raw["status_reason"]
    board.last_active_ns = raw["last_active_ns"]
    board.last_scored_ns = raw["last_scored_ns"]
    board.actors = raw["actors"]
    return board


def route_to_json(on_board: RouteOnBoard) -> bytes:
    r = on_board
    return _dumps(
        [
            r.verified,
            r.by_maintainer,
            r.reported,
            r.failed,
            r.adopted,
            r.checks,
            r.checks_passed,
            r.reports,
            r.history.tolist(),
            r.passes,
            r.disqualified,
        ]
    )


def route_from_json(version: int, route: str, data: bytes) -> RouteOnBoard:
    (verified, by_maintainer, reported, failed, adopted, checks, passed, reports, history, passes, disqualified) = (
        json.loads(data)
    )
    r = RouteOnBoard((version, route))
    r.verified, r.by_maintainer, r.reported, r.failed = (
        None if e is None else Entry(*e) for e in (verified, by_maintainer, reported, failed)
    )
    r.adopted, r.checks, r.checks_passed, r.reports = adopted, checks, passed, reports
    r.history.extend(history)
    r.passes = [Entry(*e) for e in passes]
    r.disqualified = {check_id: tuple(verdict) for check_id, verdict in disqualified.items()}
    return r


def globals_to_json(state: State) -> bytes:
    return _dumps(
        {
            "projection_version": projection.PROJECTION_VERSION,
            "position": state.position,
            "now_ns": state.now_ns,
            "in_force": state.in_force,
            "routes": state.routes,
            "agents": sorted(state.agents),
            "not_agents": sorted(state.not_agents),
        }
    )


def state_from_json(globals_json: bytes, boards: Iterable[bytes], routes: Iterable[tuple[int, str, bytes]]) -> State:
    """The state from its rows: the globals, each board, and each (version, route, route row)."""
    raw = json.loads(globals_json)
    version = projection.PROJECTION_VERSION
    if raw.get("projection_version") != version:
        raise StaleProjection(f"stored by projection version {raw.get('projection_version')}, not {version}")
    state = State()
    state.position = raw["position"]
    state.now_ns = raw["now_ns"]
    state.in_force = raw["in_force"]
    state.routes = {name: RouteInfo(*info) for name, info in raw["routes"].items()}
    state.agents = set(raw["agents"])
    state.not_agents = set(raw["not_agents"])
    for data in boards:
        board = board_from_json(data)
        state.boards[board.version] = board
    for version, route, data in routes:
        state.boards[version].routes[route] = route_from_json(version, route, data)
    return state


def state_rows(state: State):
    """Every row of the state: (globals, [board rows], [(version, route, route row)])."""
    versions = sorted(state.boards)
    boards = [board_to_json(state.boards[v]) for v in versions]
    routes = [
        (v, name, route_to_json(state.boards[v].routes[name]))
        for v in versions
        for name in sorted(state.boards[v].routes)
    ]
    return globals_to_json(state), boards, routes


def state_to_json(state: State) -> bytes:
    """The whole state, canonically: equal states give equal bytes."""
    globals_json, boards, routes = state_rows(state)
    routes_json = [[v, name, json.loads(data)] for v, name, data in routes]
    return (
        b'{"boards":[' + b",".join(boards) + b'],"globals":' + globals_json + b',"routes":' + _dumps(routes_json) + b"}"
    )
