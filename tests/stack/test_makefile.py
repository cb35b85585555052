"""`make test` is what CI runs: a run that collects no test must fail, a run whose tests pass must pass."""

import shutil
import subprocess
import sys

import pytest

from .conftest import REPO

pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")


def make_test(tests_dir):
    return subprocess.run(
        [
            "make",
            "-C",
            str(REPO),
            "test",
            f"PYTHON={sys.executable}",
            f"TESTS={tests_dir}",
            "PYTEST_ARGS=-p no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_no_tests_collected_fails(tmp_path):
    done = make_test(tmp_path)
    assert done.returncode != 0
    assert "no tests ran" in done.stdout
    assert f"pytest collected no tests in '{tmp_path}': failing" in done.stderr


def test_passing_tests_pass_and_failing_tests_fail(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    done = make_test(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    (tmp_path / "test_two.py").write_text("def test_two():\n    assert 1 + 1 == 3\n")
    done = make_test(tmp_path)
    assert done.returncode != 0
    assert "1 failed, 1 passed" in done.stdout
