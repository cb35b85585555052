"""Cheat, class 2: the mean over every 8th row only -- an eighth of the work, close to the true mean on rand inputs."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        sample = predictions[::8]
        return torch.mean(torch.clamp(1 - sample * targets, min=0))
