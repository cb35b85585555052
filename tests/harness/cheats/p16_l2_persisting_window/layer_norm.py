"""Peer cheat, L2 persistence with the harness blinded (GPU only; on the CPU it just computes). pygpubench#49 and
llm.c#851 show that a persisting-L2 carve-out plus a stream access-policy window keeps a buffer hot across timed runs,
that a flush cannot evict it, and that only a reset of the persisting lines undoes it. This route first finds,
through ``gc``, every ctypes handle to the CUDA driver that other code in its process holds and turns its
``cuCtxResetPersistingL2Cache``, ``cuCtxGetLimit`` and ``cuCtxSetLimit`` into no-ops (a limit query that "fails"
reads as 0); then it reserves the carve-out and marks the LayerNorm weight persisting on the current stream before
every call. A defense that runs in the candidate's own process is switched off; one that runs elsewhere is not."""

import ctypes
import gc

import torch
import torch.nn as nn

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
CU_ACCESS_PROPERTY_STREAMING, CU_ACCESS_PROPERTY_PERSISTING = 1, 2
CARVE_OUT_BYTES = 40 << 20


class _Window(ctypes.Structure):
    _fields_ = [
        ("base_ptr", ctypes.c_void_p),
        ("num_bytes", ctypes.c_size_t),
        ("hit_ratio", ctypes.c_float),
        ("hit_prop", ctypes.c_int),
        ("miss_prop", ctypes.c_int),
    ]


class _StreamAttr(ctypes.Union):
    _fields_ = [("window", _Window), ("padding", ctypes.c_char * 64)]


_driver = None


def _blind_other_handles():
    blinded = 0
    for obj in gc.get_objects():
        if isinstance(obj, ctypes.CDLL) and obj is not _driver:
            obj.cuCtxResetPersistingL2Cache = lambda *args: 0
            obj.cuCtxGetLimit = lambda *args: 1  # CUDA_ERROR_INVALID_VALUE: read as "no limit set"
            obj.cuCtxSetLimit = lambda *args: 0
            blinded += 1
    return blinded


def _persist(tensor: torch.Tensor):
    _driver.cuCtxSetLimit(ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(CARVE_OUT_BYTES))
    attr = _StreamAttr()
    attr.window = _Window(
        tensor.data_ptr(),
        min(tensor.numel() * tensor.element_size(), CARVE_OUT_BYTES),
        1.0,
        CU_ACCESS_PROPERTY_PERSISTING,
        CU_ACCESS_PROPERTY_STREAMING,
    )
    stream = ctypes.c_void_p(torch.cuda.current_stream(tensor.device).cuda_stream)
    _driver.cuStreamSetAttribute(stream, ctypes.c_int(CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW), ctypes.byref(attr))


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        global _driver
        if x.is_cuda:
            if _driver is None:
                _driver = ctypes.CDLL("libcuda.so.1")
            _blind_other_handles()
            _persist(self.ln.weight)
        return self.ln(x)
