"""ServerConfig: every server's ports and PostgreSQL pool from the environment, defaults as docs/ARCHITECTURE.md
("The process model") fixes them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.common.config import ServerConfig
from services.common.eventlog import EventLog

REPO = Path(__file__).resolve().parents[2]

# docs/ARCHITECTURE.md, "The process model": gRPC and /metrics ports per service (the relay: metrics only).
CONTRACT = {
    "ingest": (50051, 9101),
    "scheduler": (50052, 9102),
    "verifier": (50053, 9103),
    "board": (50054, 9104),
    "relay": (None, 9105),
}


@pytest.mark.parametrize("service", CONTRACT)
def test_defaults_are_the_fixed_ports(service):
    config = ServerConfig.from_env(service, {})
    assert (config.grpc_port, config.metrics_port) == CONTRACT[service]
    assert 1 <= config.pool_min_size <= config.pool_max_size


def test_each_setting_comes_from_its_variable():
    env = {
        "KB_BOARD_PORT": "6054",
        "KB_BOARD_METRICS_PORT": "7104",
        "KB_INGEST_PORT": "1",  # another service's: not the board's
        "KB_PG_POOL_MIN_SIZE": "2",
        "KB_PG_POOL_MAX_SIZE": "3",
        "KB_PG_CONNECT_TIMEOUT_S": "2.5",
    }
    config = ServerConfig.from_env("board", env)
    assert (config.grpc_port, config.metrics_port) == (6054, 7104)
    assert config.pool_options() == {"min_size": 2, "max_size": 3, "timeout": 2.5}
    assert ServerConfig.from_env("relay", {"KB_RELAY_METRICS_PORT": "0"}).metrics_port == 0


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KB_INGEST_PORT": "fifty"}, "KB_INGEST_PORT='fifty' is not an integer"),
        ({"KB_INGEST_METRICS_PORT": "70000"}, "KB_INGEST_METRICS_PORT='70000' must be between 0 and 65535"),
        ({"KB_PG_POOL_MAX_SIZE": "0"}, "KB_PG_POOL_MAX_SIZE='0' must be >= 1"),
        ({"KB_PG_CONNECT_TIMEOUT_S": "soon"}, "KB_PG_CONNECT_TIMEOUT_S='soon' is not a number"),
        (
            {"KB_PG_POOL_MIN_SIZE": "8", "KB_PG_POOL_MAX_SIZE": "4"},
            "KB_PG_POOL_MIN_SIZE=8 exceeds KB_PG_POOL_MAX_SIZE=4",
        ),
    ],
)
def test_a_bad_value_names_its_variable(env, message):
    with pytest.raises(ValueError) as caught:
        ServerConfig.from_env("ingest", env)
    assert message in str(caught.value)


async def test_the_pool_options_size_a_real_pool(database_url):
    config = ServerConfig.from_env("verifier", {"KB_PG_POOL_MIN_SIZE": "1", "KB_PG_POOL_MAX_SIZE": "3"})
    log = await EventLog.connect(database_url, **config.pool_options())
    try:
        assert (log.pool.get_min_size(), log.pool.get_max_size()) == (1, 3)
        assert log.pool.get_size() == 1  # min_size connections opened at start
    finally:
        await log.close()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("KB_SLOW_RPC_MS", "fast", "KB_SLOW_RPC_MS='fast' is not a number"),
        ("KB_SHUTDOWN_GRACE_S", "-1", "KB_SHUTDOWN_GRACE_S='-1' must be >= 0"),
    ],
)
def test_a_servers_bad_logging_or_shutdown_setting_stops_it_with_the_variable_named(variable, value, message):
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'protos'}", variable: value}
    started = subprocess.run(
        [sys.executable, "-c", "import services.common.grpcserver"], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert started.returncode != 0 and message in started.stderr
