"""A service process for the shutdown tests: ``serve()`` with the test servicers, ports 0, JSON logs on stderr.

Run as ``python -m tests.common.serve_test_services [DATABASE_URL]``; with a database URL the calls need a token.
"""

import asyncio
import sys

from services.common.grpcserver import serve
from services.common.logs import configure_logging, get_logger
from tests.common.servicers import add_all


async def main(database_url: str | None) -> None:
    log = get_logger()
    pool = None
    if database_url:
        import asyncpg

        pool = await asyncpg.create_pool(database_url, min_size=1, max_size=4)

    async def started():
        log.info("on_start ran")

    async def stopped():
        if pool is not None:
            await pool.close()
        log.info("on_stop ran")

    await serve(
        "test",
        add_all,
        port=0,
        metrics_port=0,
        host="127.0.0.1",
        pool=pool,
        on_start=[started],
        on_stop=[stopped],
        grace=5,
    )


if __name__ == "__main__":
    configure_logging("test")
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
