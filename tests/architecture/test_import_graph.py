"""The layers, as docs/ARCHITECTURE.md draws them: protos -> contracts -> services/common -> each service. Read from
the import statements of every module under contracts/ and services/ (function-local ones included, since a circle
through a function-local import is still a circle; those under ``if TYPE_CHECKING:`` left out, since they never run):

- no circle between modules;
- contracts/ imports no service;
- services/common/ imports no service;
- no service imports another. The ``kb`` command modules beside each service (``cli.py``, ``*_cli.py``,
  ``cli_*.py``) are the client's, not the service's: they may also import services/cli, the client's own package.
"""

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("contracts", "services")
CLIENT = "services.cli"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _typing_only(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:``: imports for annotations, which never run."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _runtime_nodes(tree: ast.AST):
    """Every node of the tree but those under ``if TYPE_CHECKING:`` (its ``else`` runs, and is kept)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if _typing_only(node):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module name an import statement of ``module`` names (``from a import b`` names a and a.b)."""
    package = module if is_package else module.rpartition(".")[0]
    names = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of contracts/ and services/ and the modules of theirs it imports."""
    paths = {module_name(p, root): p for top in LAYERS for p in sorted((root / top).rglob("*.py"))}
    return {
        module: {
            name
            for name in imported(ast.parse(path.read_text()), module, path.name == "__init__.py")
            if name in paths and name != module
        }
        for module, path in paths.items()
    }


def service_of(module: str) -> str | None:
    """``ingest`` for services.ingest.app; None outside services/ or for a module at its top."""
    parts = module.split(".")
    return parts[1] if parts[0] == "services" and len(parts) > 2 else None


def is_command_module(module: str) -> bool:
    last = module.rpartition(".")[2]
    return last == "cli" or last.endswith("_cli") or last.startswith("cli_")


def layer_breaches(graph: dict[str, set[str]]) -> list[str]:
    breaches = []
    for module, target in ((m, t) for m, targets in graph.items() for t in targets):
        source, imported_service = service_of(module), service_of(target)
        if module.startswith("contracts") and target.startswith("services"):
            breaches.append(f"{module} -> {target}: contracts/ imports no service")
        elif imported_service is None or imported_service in (source, "common"):
            continue
        elif target.startswith(CLIENT + ".") and is_command_module(module):
            continue  # a kb command uses the client's package
        elif source == "common":
            breaches.append(f"{module} -> {target}: services/common imports no service")
        elif source is not None:
            breaches.append(f"{module} -> {target}: a service imports another")
    return sorted(breaches)


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of imports (its modules, the first repeated at the end), or [] when there is none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        return list(err.args[1])
    return []


def test_no_circle_between_modules():
    assert circle(import_graph()) == []


def test_no_service_imports_another_and_the_layers_hold():
    assert layer_breaches(import_graph()) == []


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    "files, found",
    [
        (
            {
                "services/common/auth.py": "from services.common.grpcserver import wrap\n",
                "services/common/grpcserver.py": "def start():\n    from services.common.auth import Interceptor\n",
            },
            "circle",
        ),
        ({"services/web/app.py": "from services.board import render\n", "services/board/render.py": ""}, "another"),
        (
            {
                "services/a/x.py": "from typing import TYPE_CHECKING\nfrom services.a import y\n",
                "services/a/y.py": "if True:\n    from services.a import x\n",
            },
            "circle",
        ),
        ({"services/common/bus.py": "import services.ingest.store\n", "services/ingest/store.py": ""}, "common"),
        ({"contracts/names.py": "from services.common import auth\n", "services/common/auth.py": ""}, "contracts/"),
    ],
)
def test_the_graph_sees_each_breach(tmp_path, files, found):
    graph = import_graph(write(tmp_path, files))
    report = [" ".join(circle(graph))] if found == "circle" and circle(graph) else layer_breaches(graph)
    assert report and (found == "circle" or found in report[0]), report


def test_a_kb_command_may_use_the_client_and_its_own_service(tmp_path):
    files = {
        "services/ingest/cli.py": "from services.cli.client import channel\nfrom services.ingest import domain\n",
        "services/ingest/domain.py": "from contracts import names\nfrom services.common import auth\n",
        "services/cli/client.py": "",
        "services/common/auth.py": "",
        "contracts/names.py": "",
    }
    graph = import_graph(write(tmp_path, files))
    assert circle(graph) == [] and layer_breaches(graph) == []


def test_an_import_for_annotations_only_is_no_circle(tmp_path):
    files = {
        "services/a/x.py": "from services.a import y\n",
        "services/a/y.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from services.a import x\n",
    }
    assert circle(import_graph(write(tmp_path, files))) == []
