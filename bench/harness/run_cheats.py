"""Every cheat route of tests/harness/cheats and every attack of tests/harness/attacks through the harness, static
pass skipped so that the dynamic defenses are what catches them (the static pass is covered by the CPU tests). Route
code runs in each check's candidate process, never in this one.

usage: python -m bench.harness.run_cheats OUT.json [--shapes full|smoke] [--device cuda|cpu]
"""

import argparse
import json
import sys
from pathlib import Path

from services.verifier.harness.check import run_check

REPO = Path(__file__).resolve().parents[2]
CHEATS = REPO / "tests" / "harness" / "cheats"
ATTACKS = REPO / "tests" / "harness" / "attacks"  # issue 13's attacks on a judge sharing its process


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--shapes", default="full")
    parser.add_argument("--device")
    args = parser.parse_args()
    found = [d for base in (CHEATS, ATTACKS) for d in base.iterdir() if d.is_dir() and any(d.glob("*.py"))]
    directories = sorted(found, key=lambda d: (d.name.startswith("c06"), d.name))
    results = {}
    for directory in directories:
        (route_file,) = directory.glob("*.py")
        doc = run_check(
            directory,
            REPO / "scienceslack.json",
            shapes=args.shapes,
            only=[route_file.stem],
            device=args.device,
            skip_static=True,
        )
        results[directory.name] = doc
        print(f"{directory.name:<22} passed={doc['passed']!s:<5} {'; '.join(doc['reasons'])[:220]}", flush=True)
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
