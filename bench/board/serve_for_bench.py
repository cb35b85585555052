"""The board's read path as the service runs it (projector caught up from the log, gRPC server with auth and
observability), on a given database, for bench_getboard.py. Writes its gRPC and metrics ports to PORT_FILE and
serves until killed."""

import asyncio
import gc
import sys

from services.board.api import add_to_server
from services.board.projector import Projector
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from services.common.logs import configure_logging
from services.common.metrics import start_metrics_server


async def main(database_url: str, port_file: str) -> None:
    configure_logging("board")  # INFO, as the service runs
    log = await EventLog.connect(database_url)
    projector = Projector(log)
    await projector.start()
    gc.freeze()  # as the service does once caught up (services/board/server.py)
    server = await start_server("board", add_to_server(projector), port=0, pool=log.pool)
    metrics_port = start_metrics_server(0, addr="127.0.0.1")
    with open(port_file, "w") as out:
        out.write(f"{server.port} {metrics_port}")
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
