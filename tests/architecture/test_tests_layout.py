"""The tests' own layout: what tests share lives in tests/support/ (or a folder's conftest and helper modules), so
no module imports a test module -- importing one runs its module-level code and ties two suites together."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imports_of_test_modules(root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / "tests").rglob("*.py")) + sorted((root / "bench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if name.startswith("tests.") and name.rpartition(".")[2].startswith("test_"):
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {name}")
    return found


def test_no_module_imports_a_test_module():
    assert imports_of_test_modules() == []


def test_the_check_sees_such_an_import(tmp_path):
    (tmp_path / "tests" / "a").mkdir(parents=True)
    (tmp_path / "bench").mkdir()
    (tmp_path / "tests" / "a" / "test_b.py").write_text("from tests.a.test_c import helper\n")
    assert imports_of_test_modules(tmp_path) == ["tests/a/test_b.py:1 imports tests.a.test_c"]
