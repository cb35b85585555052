"""docs/ARCHITECTURE.md, "Layers": imports run downwards only and services never import each other (the web board
reads the board through its RPCs, and words results through contracts/results.py, never services/board)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# services/common, and services/cli: the kb client code that each kb command module (a cli.py) builds on
SHARED = {"common", "cli"}


def imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_services_never_import_each_other_and_contracts_import_no_service():
    wrong = []
    for path in sorted((ROOT / "services").rglob("*.py")):
        own = path.relative_to(ROOT).parts[1]
        allowed = {own, *SHARED} if own not in SHARED or path.name.endswith("cli.py") else {own, "common"}
        for name in imported(path):
            parts = name.split(".")
            if parts[0] == "services" and len(parts) > 1 and parts[1] not in allowed:
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    for path in sorted((ROOT / "contracts").rglob("*.py")):
        wrong += [f"{path.relative_to(ROOT)} imports {n}" for n in imported(path) if n.split(".")[0] == "services"]
    assert wrong == []
