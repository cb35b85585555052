"""An event NATS cannot carry, on a private stack of its own: a nats-server whose max_payload (32 KiB) is below the
log's event limit, a throwaway database, the relay as its own process (python -m services.common.relay) and a
consumer following the stream. The relay records the event, counts it, skips it on the bus and goes on; the consumer
reads it from the log (its gap repair), in order; the alert fires."""

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import urllib.request

import pytest
from kernelboard.v1 import events_pb2 as pb

from services.common import bus
from services.common.config import Settings
from services.common.consumer import Consumer
from services.common.eventlog import EventLog, NewEvent
from tests.e2e.stack import ROOT, PrivateNats, free_port, wait_for
from tests.support.databases import throwaway_database

pytestmark = pytest.mark.timeout(180)

NATS_MAX_PAYLOAD = 32 * 1024
STREAM = "KB_FAULTS_OVERSIZED"


class RelayProcess:
    def __init__(self, settings: Settings, log_path):
        self.settings = settings
        self.metrics_port = free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": f"{ROOT}:{ROOT / 'protos'}",
            "KB_DATABASE_URL": self.settings.database_url,
            "KB_NATS_URL": self.settings.nats_url,
            "KB_EVENTS_STREAM": self.settings.events_stream,
            "KB_EVENTS_SUBJECT_PREFIX": self.settings.events_subject_prefix,
        }
        argv = [sys.executable, "-m", "services.common.relay", "--poll-interval", "0.2"]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                [*argv, "--metrics-port", str(self.metrics_port)], cwd=ROOT, env=env, stdout=out, stderr=out
            )

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=20)

    def metric(self, name: str) -> float | None:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            text = urllib.request.urlopen(url, timeout=2).read().decode()
        except OSError:
            return None
        series = f'{name}{{stream="{self.settings.events_stream}"}} '
        values = [float(line[len(series) :]) for line in text.splitlines() if line.startswith(series)]
        return values[0] if values else None


@pytest.fixture
async def private(tmp_path):
    nats_server = PrivateNats(tmp_path, max_payload=NATS_MAX_PAYLOAD)
    nats_server.start()
    try:
        async with throwaway_database("faults_oversized") as url:
            settings = Settings(
                database_url=url,
                nats_url=nats_server.url,
                events_stream=STREAM,
                events_subject_prefix="kbfaults.oversized",
            )
            log = await EventLog.connect(url)
            relay = RelayProcess(settings, tmp_path / "relay.log")
            try:
                yield settings, log, relay
            finally:
                relay.kill()
                await log.close()
    finally:
        nats_server.stop()


async def stream_event_ids(settings: Settings) -> list[str]:
    nc = await bus.connect(settings)
    try:
        js = nc.jetstream()
        try:
            count = (await js.stream_info(settings.events_stream)).state.messages
        except Exception:  # noqa: BLE001 - not created yet
            return []
        return [
            pb.Event.FromString((await js.get_msg(settings.events_stream, s)).data).event_id
            for s in range(1, count + 1)
        ]
    finally:
        await nc.close()


async def test_an_event_too_large_for_nats_is_recorded_skipped_and_read_from_the_log(private, tmp_path):
    settings, log, relay = private
    applied: list[str] = []

    async def record(conn, event):
        applied.append(event.event_id)

    # A fetch that waits long: within this test only the gap in positions (not a quiet poll) brings the event in.
    consumer = Consumer("faults-oversized", log, settings, record, fetch_timeout_s=60)
    relay.start()
    following = asyncio.create_task(consumer.run())
    try:
        await asyncio.wait_for(consumer.ready.wait(), 30)
        await wait_for(lambda: relay.metric("kb_relay_active") == 1.0, "the relay active", 60)
        assert relay.metric("kb_relay_skipped_events") == 0.0

        small = pb.JobHeld(job_id="1", reason="JobHeldAdmin")
        large = pb.PullRequestReviewed(number=1, verdict=pb.REVIEW_VERDICT_COMMENT, body="x" * 40_000, reviewer="eve")
        [first] = await log.append("faults", None, [NewEvent(small, "test")])
        [oversized] = await log.append("faults", None, [NewEvent(large, "test")])
        [after] = await log.append("faults", None, [NewEvent(small, "test")])
        assert len(oversized.SerializeToString()) > NATS_MAX_PAYLOAD

        async def on_the_bus():
            return await stream_event_ids(settings) == [first.event_id, after.event_id]

        await wait_for(on_the_bus, "the events around the oversized one on NATS, the oversized one skipped", 30)
        await wait_for(
            lambda: applied == [first.event_id, oversized.event_id, after.event_id],
            "the consumer applying the skipped event from the log, in order",
            30,
            0.2,
        )
        skipped = await log.pool.fetch("SELECT * FROM relay_skipped WHERE stream = $1", STREAM)
        assert [(r["global_position"], str(r["event_id"]), r["type"]) for r in skipped] == [
            (oversized.global_position, oversized.event_id, "PullRequestReviewed")
        ]
        assert skipped[0]["bytes"] == len(oversized.SerializeToString())
        assert skipped[0]["limit_bytes"] == NATS_MAX_PAYLOAD
        await wait_for(lambda: relay.metric("kb_relay_skipped_events") == 1.0, "the skip counted", 10)
        assert_relay_skipped_alert_fires(tmp_path, 0.0, 1.0)
        checkpoint = await log.pool.fetchval("SELECT position FROM relay_checkpoints WHERE stream = $1", STREAM)
        assert checkpoint == after.global_position

        # A restarted relay reports the skips recorded before it, and keeps publishing.
        relay.kill()
        relay.start()
        await wait_for(lambda: relay.metric("kb_relay_skipped_events") == 1.0, "the count after a restart", 60)
        [later] = await log.append("faults", None, [NewEvent(small, "test")])

        async def later_on_the_bus():
            return (await stream_event_ids(settings))[-1:] == [later.event_id]

        await wait_for(later_on_the_bus, "an event after the restart on NATS", 30)
        await wait_for(lambda: applied[-1:] == [later.event_id], "the consumer applying it", 30, 0.2)
    finally:
        await consumer.stop()
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)


def assert_relay_skipped_alert_fires(tmp, before: float, after: float) -> None:
    """The skipped-events gauge as this relay moved it, through the operators' alert rules with promtool."""
    import yaml

    rules = ROOT / "deploy" / "prometheus" / "alerts.yml"
    if not shutil.which("promtool"):
        pytest.skip("promtool missing (Debian's prometheus package)")
    groups = yaml.safe_load(rules.read_text())["groups"]
    [rule] = [r for g in groups for r in g["rules"] if r.get("alert") == "KernelboardRelaySkippedEvents"]
    annotations = {
        key: text.replace("{{ $value }}", f"{after - before:g}").replace("{{ $labels.stream }}", STREAM)
        for key, text in rule["annotations"].items()
    }
    alert = {
        "eval_time": "3m",
        "alertname": "KernelboardRelaySkippedEvents",
        "exp_alerts": [{"exp_labels": {"severity": "critical", "stream": STREAM}, "exp_annotations": annotations}],
    }
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": f'kb_relay_skipped_events{{job="relay", stream="{STREAM}"}}',
                        "values": f"{before:g} {before:g} {after:g}x80",
                    }
                ],
                "alert_rule_test": [alert],
            }
        ],
    }
    path = tmp / "relay_skipped_test.yml"
    path.write_text(yaml.safe_dump(test))
    result = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
