"""Bad input on the output hand-over: an output larger than the region the judge made for outputs (the largest
reference output of the check, 4 MB at least on the CPU). It must come back as a wrong result with its shape named,
not as a failed copy on the candidate's side."""

import torch

from kernels.problems.log_softmax import Model


class ModelNew(Model):
    def forward(self, x):
        return torch.zeros(x.shape[0], 1 << 20)  # 20 MB at the smoke shape's 5 rows
