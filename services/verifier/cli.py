"""``kb verify``: judge a route directory with the harness (torch is imported only when the command runs)."""

from services.verifier.harness.args import add_arguments


def register(subparsers) -> None:
    from services.verifier.checks_cli import register as register_checks

    register_checks(subparsers)
    parser = subparsers.add_parser(
        "verify",
        help="judge a route directory against the 12 problems and write the metrics file",
        description="Exit 0 passed, 1 a guardrail broken, 2 could not run.",
    )
    add_arguments(parser)
    parser.set_defaults(handler=_handle)


def _handle(args) -> int:
    from services.verifier.harness.main import handle

    return handle(args)
