"""`make test` is what CI runs: a run that collects no test must fail, a run whose tests pass must pass."""

import os
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


STACK_TESTS = """
import os
import pytest
from tests.missing import missing_service

def test_the_stack_environment_was_read():
    assert os.environ.get("SLURM_CONF") == "/from/stack.env"

@pytest.mark.skipif(True, reason=missing_service("Slurm", "not up here"))
def test_needs_slurm():
    pass

@pytest.mark.skipif(True, reason="skipped for a reason of its own")
def test_skipped_otherwise():
    pass
"""


def test_a_new_shell_gets_the_stacks_environment_and_a_summary_of_what_a_missing_service_skipped(tmp_path):
    """`make up` then `make test` in a new shell: the Makefile reads KB_HOME/stack.env as CI's run does, and the
    summary names each test skipped for a missing service (tests/conftest.py), and no other skip."""
    home = tmp_path / "state"
    home.mkdir()
    (home / "stack.env").write_text("SLURM_CONF=/from/stack.env\n")
    tests = tmp_path / "suite"
    tests.mkdir()
    (tests / "test_stack.py").write_text(STACK_TESTS)
    new_shell = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "KB_HOME", "MAKEFLAGS")}
    done = subprocess.run(
        ["make", "-C", str(REPO), "test", f"PYTHON={sys.executable}", f"TESTS={tests}", f"KB_HOME={home}"]
        + ["PYTEST_ARGS=-p no:cacheprovider -p tests.conftest -rN"],
        capture_output=True,
        text=True,
        timeout=120,
        env=new_shell,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 2 skipped" in done.stdout
    summary = done.stdout.split("1 skipped for a missing service: not tested by this run")[1]
    assert "missing service: Slurm (not up here): 1\n" in summary
    assert "test_stack.py::test_needs_slurm" in summary and "test_skipped_otherwise" not in summary
