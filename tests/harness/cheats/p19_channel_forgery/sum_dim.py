"""Peer cheat, the result channel (pygpubench's "FD overwrite" and "pipe interpose", moved to a judge that talks to
its candidate over a pipe): on its first call the route finds the pipe to the judge (``KB_CHANNEL_FDS``, else every
open pipe of its process) and writes a forged reply into it -- a header claiming a finished, passed call with a
0.0001 ms time -- followed by a length prefix of 4 GB, so that a judge that believed the first or waited for the
second would be fooled or hang. Then it computes honestly."""

import json
import os
import stat
import struct

import torch
import torch.nn as nn

FORGED = {"op": "done", "passed": True, "device_ms": 0.0001, "wall_ms": 0.0001, "forged_by": "p19"}


def _pipes_to_the_judge() -> list[int]:
    named = os.environ.get("KB_CHANNEL_FDS", "")
    if named:
        return [int(named.split(",")[1])]
    found = []
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                found.append(fd)
        except OSError:
            continue
    return found


def _forge():
    body = json.dumps(FORGED).encode()
    for fd in _pipes_to_the_judge():
        try:
            os.write(fd, struct.pack(">I", len(body)) + body + struct.pack(">I", 0xFFFFFFF0))
        except OSError:
            pass


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim
        self.forged = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.forged:
            self.forged = True
            _forge()
        return torch.sum(x, dim=self.dim, keepdim=True)
