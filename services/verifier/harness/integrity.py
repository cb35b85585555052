"""Class 6 defenses: private copies of what the harness trusts, and a check that route code swapped none of it.

This module must be imported before any route code runs: the functions bound here are the ones the harness compares
and times with, whatever a route later does to ``torch`` or ``time``. Route code runs only in the candidate process
(candidate_process.py), so in the judge these bindings are simply the originals; in the candidate process the
snapshot is defence in depth that names class 6 early (route code there could rewrite the snapshot too: the judge
never relies on it).
"""

import builtins
import json
import os
import sys
import threading
import time

import torch
import torch._dynamo  # noqa: F401 -- imported now because its import rebinds torch.manual_seed (lazily, otherwise)
import torch.nn as nn
import torch.nn.functional as F
import torch.profiler  # noqa: F401 -- likewise loaded before the snapshot

allclose = torch.allclose
equal = torch.equal
isnan = torch.isnan
isfinite = torch.isfinite
perf_counter = time.perf_counter
active_threads = threading.active_count
tensor_type = torch.Tensor
cuda_event = torch.cuda.Event
cuda_synchronize = torch.cuda.synchronize
cuda_elapsed = torch.cuda.Event.elapsed_time

# Namespaces whose callables a route might swap to fool the comparison, the timer or the result channel. Private
# names (a leading underscore) are skipped in torch's own namespaces because torch rebinds some of them lazily.
_WATCHED = {
    "torch": torch,
    "torch.Tensor": torch.Tensor,
    "torch.nn.Module": nn.Module,
    "torch.nn.functional": F,
    "torch.cuda": torch.cuda,
    "torch.cuda.Event": torch.cuda.Event,
    "time": time,
    "json": json,
    "os": os,
    "sys": sys,
    "threading": threading,
    "builtins": builtins,
}
_ALWAYS = {"__import__", "__init__", "__call__", "__eq__", "__torch_function__", "__torch_dispatch__"}


def _callables(namespace, include_private: bool) -> dict:
    """name -> (the callable, its code object): swapping a function's ``__code__`` keeps its identity."""
    found = {}
    for name, value in list(vars(namespace).items()):
        if name.startswith("_") and not include_private and name not in _ALWAYS:
            continue
        if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
            found[name] = (value, getattr(value, "__code__", None))
    return found


class Snapshot:
    """Identity of every watched callable; ``changes()`` names the ones replaced or removed since."""

    def __init__(self, harness_modules=()):
        self._namespaces = dict(_WATCHED)
        for module in harness_modules:
            self._namespaces[module.__name__] = module
        self._taken = {
            label: _callables(ns, include_private=not label.startswith(("torch", "os", "sys")))
            for label, ns in self._namespaces.items()
        }

    def watch(self, label: str, namespace) -> None:
        """Adds a namespace (a reference problem's Model, say) from now on."""
        self._namespaces[label] = namespace
        self._taken[label] = _callables(namespace, include_private=True)

    def changes(self) -> list[str]:
        changed = []
        for label, before in self._taken.items():
            now = vars(self._namespaces[label])
            for name, (value, code) in before.items():
                current = now.get(name, _MISSING)
                if current is not value or getattr(current, "__code__", None) is not code:
                    changed.append(f"{label}.{name}")
        return changed


_MISSING = object()


def harness_modules() -> list:
    """The harness's own loaded modules, watched like torch's (a route might rebind e.g. the comparison)."""
    return [m for name, m in list(sys.modules.items()) if name.startswith("services.verifier.harness") and m]
