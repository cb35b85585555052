"""Attack: forge the verdict. At import, find the metrics file (the harness's command line or KB_METRICS), write a
passing, verified document there (pathlib: the static pass names open()) and end the process with exit status 0."""

import json
import os
from pathlib import Path

FORGED = {"score": 99.0, "cost": 0.0, "subtasks": [], "passed": True, "verified": True, "reasons": []}


def _metrics_paths():
    if os.environ.get("KB_METRICS"):
        yield os.environ["KB_METRICS"]
    pid = os.getpid()
    while pid > 1:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return
        for i, arg in enumerate(argv[:-1]):
            if arg == "--metrics":
                yield argv[i + 1]


for path in _metrics_paths():
    try:
        Path(path).write_text(json.dumps(FORGED))
    except OSError:
        pass
os.execv("/bin/true", ["true"])
