"""The arguments of ``kb verify`` (stdlib only, so that ``kb --help`` never imports torch)."""

import argparse
import os
from pathlib import Path

# What a check gets on a CPU (the service's CPU slot, services/verifier/slots.py, and `kb verify` alike): Triton
# kernels run in its interpreter. Set before triton is imported: it reads the variable when a kernel is decorated.
CPU_ENV = {"TRITON_INTERPRET": "1"}


def default_metrics(route_dir: str, environ=os.environ) -> str:
    """Where `kb verify` writes its metrics when not told: outside the repository (a metrics file in the clone's root
    is a change outside routes/<route>/, and committing it gets the push refused)."""
    cache = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = Path(route_dir).resolve().name or "route"
    return str(cache / "kernelboard" / "verify" / f"{name}.json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("route_dir", metavar="ROUTE_DIR", help="directory with <problem>.py files defining ModelNew")
    parser.add_argument(
        "--metrics",
        metavar="FILE",
        help="where to write the metrics JSON (default: ~/.cache/kernelboard/verify/<route>.json, outside the clone)",
    )
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
