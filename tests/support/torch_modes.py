"""A torch function mode the harness's memory tests watch allocations through."""

import torch
from torch.overrides import TorchFunctionMode


class LargestNewTensor(TorchFunctionMode):
    """Records the largest tensor an op returns that is not a view of one of ``watched`` (a new allocation)."""

    def __init__(self, *watched: torch.Tensor):
        super().__init__()
        self.storages = {t.untyped_storage().data_ptr() for t in watched}
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if isinstance(result, torch.Tensor) and result.untyped_storage().data_ptr() not in self.storages:
            self.largest = max(self.largest, result.numel())
        return result
