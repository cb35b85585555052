"""JSON log lines carry the service, level, timestamp and the ids bound in the current context."""

import asyncio
import io
import json
import logging

import pytest

from services.common.logs import bind_ids, configure_logging, get_logger


@pytest.fixture
def stream():
    buffer = io.StringIO()
    configure_logging("ingest", stream=buffer)
    yield buffer
    configure_logging("test")


def lines(buffer) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_line_has_service_level_timestamp_and_bound_ids(stream):
    log = get_logger(component="push")
    with bind_ids(event_id="e-1", sha="abc123", job_id=None):
        log.info("commit ingested", ref="refs/heads/routes/fast")
    log.warning("after")
    first, second = lines(stream)
    assert first["event"] == "commit ingested" and first["service"] == "ingest" and first["level"] == "info"
    assert first["event_id"] == "e-1" and first["sha"] == "abc123" and "job_id" not in first
    assert first["component"] == "push" and first["ref"] == "refs/heads/routes/fast"
    assert first["timestamp"].endswith("Z")
    assert second["level"] == "warning" and "event_id" not in second and "sha" not in second


async def test_ids_stay_with_their_task(stream):
    log = get_logger()

    async def work(job_id):
        bind_ids(job_id=job_id)
        await asyncio.sleep(0.01)
        log.info("job step")

    await asyncio.gather(work("17"), work("18"))
    assert sorted(line["job_id"] for line in lines(stream)) == ["17", "18"]


def test_standard_library_loggers_come_out_as_json(stream):
    with bind_ids(check_id="c-9"):
        logging.getLogger("asyncpg.pool").warning("connection lost")
    (line,) = lines(stream)
    assert line["event"] == "connection lost" and line["logger"] == "asyncpg.pool" and line["check_id"] == "c-9"
    assert line["service"] == "ingest" and line["level"] == "warning"


def test_exceptions_are_rendered(stream):
    try:
        raise ValueError("bad bundle")
    except ValueError:
        get_logger().exception("push failed")
    (line,) = lines(stream)
    assert line["level"] == "error" and "ValueError: bad bundle" in line["exception"]


def test_level_from_environment(monkeypatch):
    buffer = io.StringIO()
    monkeypatch.setenv("KB_LOG_LEVEL", "warning")
    configure_logging("board", stream=buffer)
    get_logger().info("hidden")
    get_logger().warning("shown")
    assert [line["event"] for line in lines(buffer)] == ["shown"]
    monkeypatch.setenv("KB_LOG_LEVEL", "chatty")
    with pytest.raises(ValueError, match="unknown log level 'chatty'"):
        configure_logging("board", stream=buffer)
    configure_logging("test", level="INFO")
