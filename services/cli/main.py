"""``kb``: one console command for agents, maintainers and operators.

Each service contributes its subcommands from ``services/<service>/cli.py`` through ``register(subparsers)``. Those
modules import their heavy dependencies inside the handlers, so that ``kb verify`` runs on a GPU machine that has
torch but neither nats-py nor asyncpg.
"""

import argparse
import importlib
import pkgutil
import sys

import services


def command_modules():
    for info in sorted(pkgutil.iter_modules(services.__path__), key=lambda m: m.name):
        if not info.ispkg or info.name == "cli":
            continue
        try:
            yield importlib.import_module(f"services.{info.name}.cli")
        except ModuleNotFoundError as err:
            if err.name != f"services.{info.name}.cli":
                raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kb", description="kernelboard: routes, pushes, jobs, checks and the board.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in command_modules():
        module.register(subparsers)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
