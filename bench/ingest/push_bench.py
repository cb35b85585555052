"""Push latency and throughput of the ingest service, end to end over gRPC, against real git and PostgreSQL.

    PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/ingest/push_bench.py > bench/ingest/results.json

Measures: sequential small pushes (one changed file: the fixed cost of a push — quarantine, checks, one
transaction, git ref update), pushes of a 1 MB and an 8 MB bundle (streamed), and concurrent pushes to distinct
routes. Uses its own database (dropped afterwards) and a temporary KB_HOME.
"""

import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
from kernelboard.v1 import events_pb2, ingest_pb2, ingest_pb2_grpc

from services.common import auth
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from services.common.logs import configure_logging
from services.ingest.api import add_to_server
from services.ingest.app import Ingest
from services.ingest.gitrepo import HostedRepo
from services.ingest.seed import seed
from tests.ingest.gitwork import WorkClone
from tests.support.databases import create_database, drop_database

CHUNK = 256 * 1024


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


async def push(stub, md, ref: str, bundle: bytes) -> float:
    def chunks():
        for offset in range(0, len(bundle), CHUNK):
            yield ingest_pb2.PushChunk(ref=ref if offset == 0 else "", data=bundle[offset : offset + CHUNK])

    started = time.perf_counter()
    await stub.PushStream(chunks(), metadata=md)
    return time.perf_counter() - started


async def route_clone(stub, md, tmp: Path, name: str) -> tuple[WorkClone, str]:
    await stub.StartRoute(ingest_pb2.StartRouteRequest(route=name), metadata=md)
    reply = await stub.Fetch(ingest_pb2.FetchRequest(refs=[f"routes/{name}"]), metadata=md)
    (tmp / f"{name}.bundle").write_bytes(reply.bundle)
    clone = WorkClone(tmp / name, "bench")
    os.system(f"git clone -q -b routes/{name} {tmp / f'{name}.bundle'} {clone.path}")
    return clone, clone.head()


async def main() -> dict:
    db_name, url = await create_database("ingest")
    tmp = Path(tempfile.mkdtemp(prefix="kb-ingest-bench-"))
    log = await EventLog.connect(url)
    try:
        ingest = Ingest(log, HostedRepo(tmp / "repo.git"), max_bundle_bytes=64 * 1024 * 1024)
        await ingest.start()
        await seed(ingest, tmp)
        async with log.pool.acquire() as conn:
            await auth.register_principal(
                conn,
                "bencher",
                events_pb2.PRINCIPAL_KIND_PERSON,
                "bencher",
                events_pb2.ROLE_MEMBER,
                log=log,
                actor="bench",
            )
            token = await auth.issue_token(conn, "bencher")
        md = (("authorization", f"Bearer {token}"),)
        started = await start_server("ingest", lambda s: add_to_server(s, ingest), port=0, pool=log.pool)
        channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{started.port}", options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        )
        stub = ingest_pb2_grpc.IngestStub(channel)

        clone, base = await route_clone(stub, md, tmp, "seq")
        small = []
        for i in range(30):
            sha = clone.commit({f"routes/seq/k{i % 3}.py": f"x = {i}\n"})
            small.append(await push(stub, md, "refs/heads/routes/seq", clone.bundle("refs/heads/routes/seq", base)))
            base = sha

        large = {}
        for megabytes in (1, 8):
            data = os.urandom(megabytes * 1024 * 1024 // 2).hex()  # incompressible text
            sha = clone.commit({f"routes/seq/blob{megabytes}.txt": data})
            bundle = clone.bundle("refs/heads/routes/seq", base)
            large[f"file_{megabytes}MB"] = {
                "bundle_bytes": len(bundle),
                **percentiles([await push(stub, md, "refs/heads/routes/seq", bundle)]),
            }
            base = sha

        routes = [await route_clone(stub, md, tmp, f"par{i}") for i in range(8)]
        bundles = []
        for i, (c, b) in enumerate(routes):
            c.commit({f"routes/par{i}/k.py": "x = 1\n"})
            bundles.append((f"refs/heads/routes/par{i}", c.bundle(f"refs/heads/routes/par{i}", b)))
        t0 = time.perf_counter()
        latencies = await asyncio.gather(*[push(stub, md, ref, b) for ref, b in bundles])
        wall = time.perf_counter() - t0

        await channel.close()
        await started.stop(0)
        return {
            "command": "PYTHONPATH=$PWD:$PWD/protos .venv/bin/python bench/ingest/push_bench.py",
            "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, python {sys.version.split()[0]}",
            "load_average_1m": round(os.getloadavg()[0], 2),  # the machine is shared: read latencies with this
            "small_push_sequential": percentiles(small),
            "large_push": large,
            "concurrent_8_routes": {
                **percentiles(list(latencies)),
                "wall_ms": round(wall * 1000, 1),
                "pushes_per_s": round(len(bundles) / wall, 1),
            },
        }
    finally:
        await log.close()
        await drop_database(db_name)


if __name__ == "__main__":
    configure_logging("ingest-bench", level="WARNING", stream=sys.stderr)
    print(json.dumps(asyncio.run(main()), indent=2))
