"""Peer cheat, verdict forgery (issue 13): at import, find the metrics file the check will be judged by -- from
``KB_METRICS`` or the ``--metrics`` argument of this process or any ancestor (``/proc/<pid>/cmdline``, relative paths
resolved through ``/proc/<pid>/cwd``) -- write a passed, verified document with score 99 there, and replace the
process with ``/bin/true`` so that it exits 0 before any judging happens."""

import json
import os

import torch.nn as nn
import torch.nn.functional as F

FORGED = {
    "verifier_version": 1,
    "passed": True,
    "verified": True,
    "not_verified_because": [],
    "reasons": [],
    "score": 99.0,
    "cost": 0.1,
    "subtasks": [],
    "forged_by": "p01_verdict_forgery",
}


def _ancestors():
    pid = os.getpid()
    while pid > 1:
        yield pid
        try:
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            return
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def _metrics_paths():
    found = [os.environ["KB_METRICS"]] if os.environ.get("KB_METRICS") else []
    for pid in _ancestors():
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split("\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        for i, arg in enumerate(argv):
            value = argv[i + 1] if arg == "--metrics" and i + 1 < len(argv) else None
            if arg.startswith("--metrics="):
                value = arg.split("=", 1)[1]
            if value:
                found.append(os.path.join(cwd, value))
    return found


def forge_and_exit():
    for path in _metrics_paths():
        try:
            with open(path, "w") as out:
                json.dump(FORGED, out)
        except OSError:
            pass
    try:
        os.execv("/bin/true", ["true"])
    except OSError:
        os._exit(0)


forge_and_exit()


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        return F.smooth_l1_loss(predictions, targets)
