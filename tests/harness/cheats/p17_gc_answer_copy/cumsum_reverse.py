"""Peer cheat, answer copy through the garbage collector (pygpubench's "GC answer copy"): never compute. Look through
``gc`` for a live tensor shaped like the output that has the reverse cumulative sum's signature for this input (last
column equal to the input's, second-to-last the sum of the input's last two) -- the reference's answer, if the harness
keeps it alive in this process -- and return a copy. A repeated input (same pointer, version and sampled elements)
gets the copy it got before; where no answer can be found, an unwritten tensor goes back."""

import gc

import torch
import torch.nn as nn


def _key(t: torch.Tensor):
    flat = t.view(-1)
    return (t.data_ptr(), t._version, float(flat[0]), float(flat[-1]))


def _looks_like_answer(candidate: torch.Tensor, x: torch.Tensor) -> bool:
    """Checked on a few elements read as Python floats: no arithmetic op a recorder would see."""
    if candidate.data_ptr() == x.data_ptr() or x.shape[-1] < 2:
        return False
    for row in (0, x.shape[0] - 1):
        last, before = float(x[row, -1]), float(x[row, -2])
        if float(candidate[row, -1]) != last or abs(float(candidate[row, -2]) - (before + last)) > 1e-5:
            return False
    return True


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.copied = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = _key(x)
        if key in self.copied:
            return self.copied[key]
        answer = torch.empty_like(x)
        for obj in gc.get_objects():
            if type(obj) is torch.Tensor and obj.shape == x.shape and obj.dtype == x.dtype and obj.device == x.device:
                if _looks_like_answer(obj, x):
                    answer.copy_(obj)
                    break
        self.copied[key] = answer
        return answer
