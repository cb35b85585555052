"""The board's read path as the service runs it (projector caught up from the log, gRPC server with auth and
observability), on a given database, for bench_getboard.py. Writes its port to PORT_FILE and serves until killed."""

import asyncio
import sys

from services.board.api import add_to_server
from services.board.projector import Projector
from services.common.eventlog import EventLog
from services.common.grpcserver import start_server
from services.common.logs import configure_logging


async def main(database_url: str, port_file: str) -> None:
    configure_logging("board", level="WARNING")
    log = await EventLog.connect(database_url)
    projector = Projector(log)
    await projector.start()
    server = await start_server("board", add_to_server(projector), port=0, pool=log.pool)
    with open(port_file, "w") as out:
        out.write(str(server.port))
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
