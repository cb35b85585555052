"""The cached launcher (kernels/triton/launch.py): its key, how route files find it, and the harness's static pass."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from triton import knobs

from kernels.triton import launch as launcher
from services.verifier.harness import static_scan

ROUTE_DIR = Path(__file__).resolve().parents[2] / "kernels" / "triton"


@triton.jit
def _scale(x_ptr, y_ptr, n, factor, BLOCK: tl.constexpr, SQUARE: tl.constexpr = False):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if SQUARE:
        x = x * x
    tl.store(y_ptr + offs, x * factor, mask=offs < n)


def _key(x, y, n, grid=(4, 1, 1), block=16, warps=4):
    return launcher.specialisation_key(_scale, grid, (x, y, n, 2.0), {"BLOCK": block}, warps, None)


def _flat(value):
    return [leaf for part in value for leaf in _flat(part)] if isinstance(value, tuple) else [value]


def test_fresh_tensors_of_one_shape_share_a_key_but_not_an_address():
    x, y = torch.ones(64), torch.empty(64)
    x2, y2 = torch.ones(64), torch.empty(64)
    assert x.data_ptr() != x2.data_ptr()
    assert _key(x, y, 64) == _key(x2, y2, 64)
    assert x.data_ptr() not in _flat(_key(x, y, 64)) and y.data_ptr() not in _flat(_key(x, y, 64))


def test_what_triton_specialises_on_changes_the_key():
    x, y = torch.ones(65), torch.empty(64)
    base = _key(x[:64], y, 64)
    assert _key(x[1:], y, 64) != base  # a 4-byte offset: no longer 16-byte aligned
    assert _key(x[:64], y, 63) != base  # another size
    assert _key(x[:64], y, 1) != base  # 1 is a constant to Triton
    assert _key(x[:64].double(), y, 64) != base  # another dtype
    assert _key(x[:64], y, 64, grid=(5, 1, 1)) != base
    assert _key(x[:64], y, 64, block=32) != base
    assert _key(x[:64], y, 64, warps=8) != base


@pytest.mark.parametrize("n", [1, 17, 100])
def test_launch_under_the_interpreter_runs_the_kernel_each_call(n, gen):
    for _ in range(2):
        x = torch.randn(n, generator=gen)
        y = torch.full((n,), float("nan"))
        launcher.launch(_scale, (triton.cdiv(n, 16),), x, y, n, 3.0, BLOCK=16, num_warps=4)
        assert torch.equal(y, x * 3.0)
    launcher.launch(_scale, (triton.cdiv(n, 16),), x, y, n, 1.0, BLOCK=16, SQUARE=True, num_warps=4)
    assert torch.equal(y, x * x)


def test_route_file_loaded_the_harness_way_finds_its_launcher(gen):
    """The harness loads <problem>.py by path, as a module with no package, the route directory on sys.path."""
    sys.path.insert(0, str(ROUTE_DIR))
    try:
        spec = importlib.util.spec_from_file_location("kb_route_test_kl_div", ROUTE_DIR / "kl_div.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROUTE_DIR))
    p = torch.softmax(torch.randn(4, 33, generator=gen), -1)
    t = torch.softmax(torch.randn(4, 33, generator=gen), -1)
    want = torch.nn.functional.kl_div(p.log(), t, reduction="batchmean")
    assert torch.allclose(module.ModelNew()(p, t), want, rtol=1e-5, atol=1e-7)


def test_the_route_passes_the_harness_static_pass():
    flagged = {name: result for name, result in static_scan.scan_route(ROUTE_DIR).items() if result.violations}
    assert not flagged, {name: result.violations for name, result in flagged.items()}


def test_a_registered_launch_hook_sends_cached_launches_through_the_metadata_path():
    """A profiler's launch hook must see every launch with its metadata, so the bare launch is only for no hooks."""
    assert launcher._no_hooks()

    def hook(metadata):
        pass

    knobs.runtime.launch_enter_hook.add(hook)
    try:
        assert not launcher._no_hooks()
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert launcher._no_hooks()


def test_host_grid_arithmetic_matches_tritons():
    """The wrappers size grids with launch.cdiv and launch.next_power_of_2 instead of Triton's (slow on the host)."""
    for n in [*range(0, 1100), 4095, 4096, 4097, 2**31 - 1, 2**31, 2**32 + 5]:
        assert launcher.next_power_of_2(n) == triton.next_power_of_2(n), n
        for d in (1, 2, 3, 4, 16, 1024, 4096):
            assert launcher.cdiv(n, d) == triton.cdiv(n, d), (n, d)


# -- graphs (launch.Graphs): a call's launches captured once per key and replayed --------------------------------------
class _Capture:
    """Stands in for torch.cuda.CUDAGraph on the CPU: a replay runs the captured body again, which (like a graph)
    writes into the tensors the capture saw."""

    def __init__(self, body):
        self.body, self.replays = body, 0

    def replay(self):
        self.replays += 1
        self.body()


@pytest.fixture
def graphs(monkeypatch):
    monkeypatch.setattr(launcher.Graphs, "usable", staticmethod(lambda first: True))
    monkeypatch.setattr(launcher.Graphs, "capture", staticmethod(_Capture))
    return launcher.Graphs(capacity=2)


def _double(graphs, x, out, runs):
    def body():
        runs.append(out.data_ptr())
        torch.mul(x, 2.0, out=out)

    graphs.run(body, (x, out))
    return out


def test_a_graph_is_captured_after_the_first_call_and_replayed_for_the_same_tensors(graphs):
    x, out, runs = torch.arange(4.0), torch.empty(4), []
    _double(graphs, x, out, runs)
    x.copy_(torch.tensor([5.0, 6.0, 7.0, 8.0]))  # new contents at the same address, as the harness hands them
    assert torch.equal(_double(graphs, x, out, runs), torch.tensor([10.0, 12.0, 14.0, 16.0]))
    (graph,) = graphs._graphs.values()
    assert graph.replays == 1 and len(runs) == 2  # the eager call, then the replay (the capture itself runs nothing)


def test_a_replay_never_writes_into_an_output_handed_out_earlier(graphs):
    """The output's address is in the key: a caller that still holds the first output and asks again gets a new
    output, and the graph of the first call is not replayed into the held one."""
    x, runs = torch.arange(4.0), []
    first = _double(graphs, x, torch.empty(4), runs)
    x.add_(1.0)
    second = _double(graphs, x, torch.empty(4), runs)
    assert torch.equal(first, torch.tensor([0.0, 2.0, 4.0, 6.0]))
    assert torch.equal(second, torch.tensor([2.0, 4.0, 6.0, 8.0]))
    assert all(graph.replays == 0 for graph in graphs._graphs.values())


def test_what_a_key_holds(graphs):
    """Address, shape, strides and dtype of each tensor, and the caller's extra: a view of the same memory with other
    strides is another key."""
    base, out, runs = torch.arange(16.0), torch.empty(16), []
    _double(graphs, base, out, runs)
    square = base.view(4, 4)
    graphs.run(lambda: runs.append("t"), (square.t(), out.view(4, 4)))
    graphs.run(lambda: runs.append("t"), (square.t(), out.view(4, 4)), extra=("variant",))
    assert len(graphs._graphs) == 2 and runs.count("t") == 2  # capacity 2: the oldest key went


def test_the_least_recently_replayed_graph_goes_first(graphs):
    x, runs = torch.arange(4.0), []
    outs = [torch.empty(4) for _ in range(3)]
    _double(graphs, x, outs[0], runs)
    _double(graphs, x, outs[1], runs)
    _double(graphs, x, outs[0], runs)  # replayed: now the most recent
    _double(graphs, x, outs[2], runs)  # evicts outs[1]'s graph
    kept = {key[2][0] for key in graphs._graphs}
    assert kept == {outs[0].data_ptr(), outs[2].data_ptr()}


def test_under_the_interpreter_every_call_runs_its_launches():
    graphs, runs = launcher.Graphs(), []
    x, out = torch.arange(4.0), torch.empty(4)
    for _ in range(3):
        _double(graphs, x, out, runs)
    assert len(runs) == 3 and not graphs._graphs


def test_a_call_whose_launches_cannot_be_captured_still_runs_them_every_time(monkeypatch):
    def refuse(body):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(launcher.Graphs, "usable", staticmethod(lambda first: True))
    monkeypatch.setattr(launcher.Graphs, "capture", staticmethod(refuse))
    graphs, runs = launcher.Graphs(), []
    x, out = torch.arange(4.0), torch.empty(4)
    for step in range(3):
        x.fill_(step)
        assert torch.equal(_double(graphs, x, out, runs), torch.full((4,), 2.0 * step))
    assert len(runs) == 3
