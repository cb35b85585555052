"""The arguments of ``kb verify`` (stdlib only, so that ``kb --help`` never imports torch)."""

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("route_dir", metavar="ROUTE_DIR", help="directory with <problem>.py files defining ModelNew")
    parser.add_argument("--metrics", required=True, metavar="FILE", help="where to write the metrics JSON")
    parser.add_argument("--shapes", choices=("full", "smoke"), default="full", help="problem sizes (default: full)")
    parser.add_argument("--only", nargs="+", metavar="ID", help="judge only these problems (the result is unverified)")
    parser.add_argument("--rules", default="scienceslack.json", help="the rules file (default: ./scienceslack.json)")
    parser.add_argument("--rules-commit", help="commit of the rules file (default: asked of git)")
    parser.add_argument(
        "--skip-static",
        action="store_true",
        help="testing only: skip the static pass to exercise the dynamic defenses (never a verified score)",
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when torch sees one, else cpu")
