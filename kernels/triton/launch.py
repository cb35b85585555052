"""Launch a Triton kernel with the JIT launcher's host work done once per specialisation.

The verifier times each call from an idle GPU (synchronize, flush, synchronize, event, call, event), so the host time
of a call is inside its measured time. Triton's JIT launcher binds, specialises and looks up its arguments on every
call (11-20 us of host time on the H200's host: bench/kernels/launch_overhead.py); the compiled kernel launched
directly costs about 5 us. ``launch`` runs the ordinary JIT launch the first time a specialisation is seen and keeps
a plan: the compiled kernel's launcher, its handle and packed metadata, the 3-d grid and the trailing constexprs.
Later calls with the same key hand the arguments straight to that launcher, as the JIT launcher itself does after
its lookup, without building the per-call closure and launch-metadata dict of ``compiled[grid](...)``.

Why this is honest under the harness's rules (kernels/NOTES.md, "Launch overhead"): only compiled code and launch
parameters are cached, never an output, an input's values or a pointer. The key holds exactly what Triton itself
specialises a kernel on -- the device, each tensor's dtype and 16-byte alignment, each integer's value, the grid and
the constexprs -- so the cached kernel is the one the JIT launcher would have picked for these arguments, and every
call still reads its inputs and writes the fresh output it was handed, on the stream current at the call.
Triton's launch hooks (a profiler's) are honoured: while one is registered every call takes ``compiled[grid]``,
which builds the metadata the hooks are given.

It also holds what several problems' files share: ``finish_mean``, the second pass of the mean losses.

The route's files import it as a sibling module (the harness puts the route directory on sys.path).
Under the CPU interpreter (TRITON_INTERPRET=1), or off the current CUDA device, every call takes the ordinary path.
"""

import os
from collections import OrderedDict

import torch
import triton
import triton.language as tl
from triton import knobs
from triton.runtime import driver

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

# key -> launch plan; bounded by the distinct specialisations a process runs (a handful per problem), and cleared if
# it ever grows past _MAX_ENTRIES (a caller passing a new float each call, say)
_PLANS: dict = {}
_MAX_ENTRIES = 1024
_TENSOR = torch.Tensor
_RUNTIME_KNOBS = knobs.runtime
_SMS: dict = {}  # CUDA device index -> its number of SMs


def cdiv(a: int, b: int) -> int:
    """triton.cdiv for host integers. Triton's is a ConstexprFunction, about 8 us a call on the host (more than a
    cached launch); the route's wrappers size their grids with this one."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """triton.next_power_of_2 for host integers (0 for 0, as Triton's), without its ConstexprFunction's cost."""
    return 1 << (n - 1).bit_length() if n > 0 else 0


def num_sms(device: torch.device) -> int:
    """The device's number of SMs (1 off CUDA), looked up once per device: torch.cuda.get_device_properties costs
    microseconds a call, and grids sized by it are built on every call."""
    if device.type != "cuda":
        return 1
    sms = _SMS.get(device.index)
    if sms is None:
        sms = _SMS[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return sms


def specialisation_key(kernel, grid, args, constexprs, num_warps, device_index):
    """The cache key of one launch: everything the JIT launcher would choose its compiled kernel by. Tensors count by
    dtype and 16-byte alignment only (never by address), scalars by value (Triton specialises integers on == 1 and on
    divisibility by 16; the value is stricter). This runs on every call, and the key's cost is what the cache saves:
    a plain loop, since a comprehension building a tuple per tensor measured 1.5x slower on the CPU."""
    key = [id(kernel), device_index, grid, num_warps, *constexprs.values()]
    for arg in args:
        if isinstance(arg, _TENSOR):
            key.append(arg.dtype)
            key.append(arg.data_ptr() & 15 == 0)
        else:
            key.append(arg)
    return tuple(key)


def _no_hooks() -> bool:
    """Whether no launch hook (a profiler's) is registered; otherwise launches go through compiled[grid], which
    builds the launch metadata the hooks receive."""
    # a hook chain (Triton >= 3.5) is empty when its list of calls is; anything else (a bare hook, None in older
    # versions) counts as registered and takes the metadata path: slower, never wrong
    enter, leave = _RUNTIME_KNOBS.launch_enter_hook, _RUNTIME_KNOBS.launch_exit_hook
    return not getattr(enter, "calls", True) and not getattr(leave, "calls", True)


def launch(kernel, grid, *args, num_warps: int = 4, **constexprs) -> None:
    """``kernel[grid](*args, num_warps=num_warps, **constexprs)``, with the launcher's host work cached."""
    first = args[0]
    if _INTERPRET or not first.is_cuda:
        kernel[grid](*args, num_warps=num_warps, **constexprs)
        return
    device = first.get_device()
    if device != torch.cuda.current_device():
        kernel[grid](*args, num_warps=num_warps, **constexprs)
        return
    key = specialisation_key(kernel, grid, args, constexprs, num_warps, device)
    plan = _PLANS.get(key)
    if plan is not None:
        run_plan(plan, device, args)
        return
    compiled = kernel[grid](*args, num_warps=num_warps, **constexprs)
    if len(_PLANS) >= _MAX_ENTRIES:
        _PLANS.clear()
    # the compiled kernel's launcher takes every parameter in order, constexprs included (it skips them)
    tail = []
    for param in kernel.params[len(args) :]:
        if param.name in constexprs:
            tail.append(constexprs[param.name])
        elif param.has_default:
            tail.append(param.default)
        else:
            raise TypeError(f"launch: {param.name} has no value")
    _PLANS[key] = make_plan(compiled, grid, tail)


def make_plan(compiled, grid, tail) -> tuple:
    """What run_plan needs to launch a compiled kernel (as returned by ``kernel[grid](...)``) again: its launcher,
    handle and packed metadata, the 3-d grid and the values of its parameters after the per-call ones."""
    grid_x, grid_y, grid_z = tuple(grid) + (1,) * (3 - len(grid))
    return (
        compiled.run,
        driver.active.get_current_stream,
        grid_x,
        grid_y,
        grid_z,
        compiled.function,
        compiled.packed_metadata,
        compiled,
        tuple(tail),
    )


def run_plan(plan: tuple, device: int, args: tuple) -> None:
    """Launch a plan's kernel on the device's current stream with the per-call arguments args."""
    run, current_stream, grid_x, grid_y, grid_z, function, metadata, compiled, tail = plan
    if _no_hooks():
        # what Triton's JIT launcher runs once it has found the compiled kernel (triton/runtime/jit.py), minus the
        # launch metadata and the calls of the empty hook chains
        run(grid_x, grid_y, grid_z, current_stream(device), function, metadata, None, None, None, *args, *tail)
    else:
        compiled[(grid_x, grid_y, grid_z)](*args, *tail)


@triton.jit
def _finish_mean(partial_ptr, out_ptr, num_partials, scale, BLOCK: tl.constexpr):
    # in float64: thousands of fp32 partials added in fp32 lose more than the reference's own reduction does
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, num_partials, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < num_partials, other=0.0).to(tl.float64)
    tl.store(out_ptr, (tl.sum(acc, axis=0) * scale).to(tl.float32))


def finish_mean(partials: torch.Tensor, out: torch.Tensor, num_partials: int, scale: float) -> None:
    """out = sum(partials[:num_partials]) * scale, by one program in a fixed order (deterministic, no atomics) and in
    float64: the second pass of the mean losses, after a first kernel wrote one float32 partial sum per program."""
    launch(_finish_mean, (1,), partials, out, num_partials, scale, BLOCK=1024, num_warps=4)


class Graphs:
    """A route's launches of one call replayed as a CUDA graph: one host call (cudaGraphLaunch) instead of a launch
    and an allocation or two per kernel, whose host time the verifier counts (each call is timed from an idle GPU).

    ``run(body, tensors, extra)``: ``body()`` allocates its own scratch and launches the call's kernels, reading and
    writing only ``tensors`` (the inputs, the parameters and the output the caller allocated) and that scratch. The
    first call with a key runs ``body`` as usual (compiling, autotuning), then captures it; a later call with the same
    key replays the capture. The key is ``extra`` (whatever else decides the launches: the variant, a scalar
    parameter) and each tensor's address, shape, strides and dtype; one ``Graphs`` serves one route function.

    Why this is honest under the harness's rules (kernels/NOTES.md, "Launch overhead"): a graph holds launches, not
    results. Each replay runs every kernel again on what is at those addresses now, and the key holds the output's
    address too, so a replay writes only into the output the caller just allocated, never into one handed out
    earlier. Scratch lives in the graph's own memory pool. Under the CPU interpreter, off the current CUDA device, or
    while a stream is being captured, ``body`` simply runs.
    """

    def __init__(self, capacity: int = 8):
        self.capacity = capacity  # graphs kept per route function; the least recently replayed goes first
        self._graphs: OrderedDict = OrderedDict()

    def run(self, body, tensors: tuple, extra: tuple = ()) -> None:
        if not self.usable(tensors[0]):
            body()
            return
        key = [extra]
        for t in tensors:
            key.append((t.data_ptr(), t.shape, t.stride(), t.dtype))
        key = tuple(key)
        if key in self._graphs:
            self._graphs.move_to_end(key)
            graph = self._graphs[key]
            if graph is None:  # its capture failed: launched as usual
                body()
            else:
                graph.replay()
            return
        body()
        try:
            self._graphs[key] = self.capture(body)
        except RuntimeError:  # not capturable here (the call's own result above stands); never tried again
            self._graphs[key] = None
        if len(self._graphs) > self.capacity:
            self._graphs.popitem(last=False)

    @staticmethod
    def usable(first: torch.Tensor) -> bool:
        return (
            not _INTERPRET
            and first.is_cuda
            and first.get_device() == torch.cuda.current_device()
            and not torch.cuda.is_current_stream_capturing()
        )

    @staticmethod
    def capture(body):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()
        return graph
