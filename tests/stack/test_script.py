"""stack.py must run before the venv exists: on a bare Python without site-packages."""

import subprocess
import sys

from .conftest import LOCAL


def test_stack_py_needs_only_the_standard_library(tmp_path):
    done = subprocess.run(
        [sys.executable, "-S", "-I", str(LOCAL / "stack.py"), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"KB_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode in (0, 3), done.stderr  # 3: a component is stopped, which is the case here
    assert f"KB_HOME {tmp_path}" in done.stdout
    assert "relay      stopped" in done.stdout


def test_a_bad_command_line_is_refused_with_usage(tmp_path):
    done = subprocess.run(
        [sys.executable, str(LOCAL / "stack.py"), "down", "nosuch"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"KB_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1
    assert "no component named nosuch; components: relay, ingest, scheduler, verifier, board" in done.stderr
