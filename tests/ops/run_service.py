"""Runs a service's own ``server.py`` (its real wiring) with its gRPC and metrics ports moved.

    python -m tests.ops.run_service SERVICE GRPC_PORT METRICS_PORT

The servers take their ports from services.common.config's GRPC_PORTS/METRICS_PORTS (the fixed contract), which
the stack and other tests on this machine may hold; this sets the two entries before the server module runs, so that
tests run the real process beside them on free ports.
"""

import runpy
import sys

from services.common import config


def main() -> None:
    service, grpc_port, metrics_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    config.GRPC_PORTS[service] = grpc_port
    config.METRICS_PORTS[service] = metrics_port
    sys.argv = [f"services.{service}.server"]
    runpy.run_module(f"services.{service}.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
