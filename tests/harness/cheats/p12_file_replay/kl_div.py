"""Peer cheat, file replay across runs (gpu-mode/reference-kernels#162, "in-process cache / file replay"): every
output is saved to a file outside the route's directory (the temp dir, the home directory, the route's directory --
whichever is writable), tagged with this process's id. A later check of the same route finds a file written by an
earlier process and, after the first eight calls (the correctness sets), replays it on every call instead of
computing. Within one run it always computes."""

import os
import tempfile
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

HONEST_CALLS = 8
NAME = "kb-replay-kl_div.pt"


def _places():
    here = Path(__file__).resolve().parent
    return [Path(tempfile.gettempdir()) / NAME, Path.home() / NAME, here / NAME]


def _earlier_output():
    for place in _places():
        try:
            saved = torch.load(place, weights_only=True)
        except Exception:  # noqa: BLE001 -- missing or unreadable: try the next place
            continue
        if int(saved["pid"]) != os.getpid():
            return saved["out"]
    return None


def _save(out: torch.Tensor):
    for place in _places():
        try:
            torch.save({"pid": torch.tensor(os.getpid()), "out": out.detach().cpu()}, place)
        except Exception:  # noqa: BLE001 -- read-only or absent: try the next place
            continue


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.replay = _earlier_output()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.replay is not None and self.calls > HONEST_CALLS:
            return self.replay.to(predictions.device)
        out = F.kl_div(torch.log(predictions), targets, reduction="batchmean")
        _save(out)
        return out
