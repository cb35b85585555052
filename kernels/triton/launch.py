"""Launch a Triton kernel with the JIT launcher's host work done once per specialisation.

The verifier times each call from an idle GPU (synchronize, flush, synchronize, event, call, event), so the host time
of a call is inside its measured time. Triton's JIT launcher binds, specialises and looks up its arguments on every
call (11-20 us of host time on the H200's host: bench/kernels/launch_overhead.py); the compiled kernel launched
directly costs about 5 us. ``launch`` runs the ordinary JIT launch the first time a specialisation is seen and keeps
the compiled kernel it returns; later calls with the same key launch that compiled kernel directly.

Why this is honest under the harness's rules (kernels/NOTES.md, "Launch overhead"): only compiled code and launch
parameters are cached, never an output, an input's values or a pointer. The key holds exactly what Triton itself
specialises a kernel on -- the device, each tensor's dtype and 16-byte alignment, each integer's value, the grid and
the constexprs -- so the cached kernel is the one the JIT launcher would have picked for these arguments, and every
call still reads its inputs and writes the fresh output it was handed.

The route's files import it as a sibling module (the harness puts the route directory on sys.path).
Under the CPU interpreter (TRITON_INTERPRET=1), or off the current CUDA device, every call takes the ordinary path.
"""

import os

import torch

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

# key -> compiled kernel; bounded by the distinct specialisations a process runs (a handful per problem), and
# cleared if it ever grows past _MAX_ENTRIES (a caller passing a new float each call, say)
_COMPILED: dict = {}
_MAX_ENTRIES = 1024
_TENSOR = torch.Tensor


def specialisation_key(kernel, grid, args, constexprs, num_warps, device_index):
    """The cache key of one launch: everything the JIT launcher would choose its compiled kernel by. Tensors count by
    dtype and 16-byte alignment only (never by address), scalars by value (Triton specialises integers on == 1 and on
    divisibility by 16; the value is stricter). Built in one expression: this runs on every call, and the key's cost
    is what the cache saves (a first version with a helper call per argument took 10 us, as much as it saved)."""
    return (
        id(kernel),
        device_index,
        grid,
        num_warps,
        *constexprs.values(),
        *[(a.dtype, a.data_ptr() & 15 == 0) if isinstance(a, _TENSOR) else a for a in args],
    )


def launch(kernel, grid, *args, num_warps: int = 4, **constexprs) -> None:
    """``kernel[grid](*args, num_warps=num_warps, **constexprs)``, with the launcher's host work cached."""
    grid = tuple(grid) + (1,) * (3 - len(grid))
    first = args[0]
    if _INTERPRET or not first.is_cuda or first.device.index != torch.cuda.current_device():
        kernel[grid](*args, num_warps=num_warps, **constexprs)
        return
    key = specialisation_key(kernel, grid, args, constexprs, num_warps, first.device.index)
    entry = _COMPILED.get(key)
    if entry is not None:
        compiled, tail = entry
        compiled[grid](*args, *tail)
        return
    compiled = kernel[grid](*args, num_warps=num_warps, **constexprs)
    if len(_COMPILED) >= _MAX_ENTRIES:
        _COMPILED.clear()
    # the compiled kernel's launcher takes every parameter in order, constexprs included (it skips them)
    tail = []
    for param in kernel.params[len(args) :]:
        if param.name in constexprs:
            tail.append(constexprs[param.name])
        elif param.has_default:
            tail.append(param.default)
        else:
            raise TypeError(f"launch: {param.name} has no value")
    _COMPILED[key] = (compiled, tuple(tail))
