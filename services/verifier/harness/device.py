"""What differs between the GPU and the CPU profile: synchronisation, the L2 flush, the persisting-L2 reset,
poisoning freed memory, and the timer.

GPU: CUDA events on the current stream, bounded by device-wide synchronisation, with the host clock read around the
same interval as a cross-check (class 5: work on a side stream shows in the wall time but not in the events).
CPU profile (CI, smoke shapes): a host timer -- the judge's: the references' calls in its own process, the candidate's
from its go to the kernel's stamp of the output (timing.py); the candidate side's is only a report. Its numbers are
indicative only and never a verified score.
"""

import ctypes
import gc
import math
from dataclasses import dataclass

import torch

from services.verifier.harness import integrity
from services.verifier.harness.gate import DeviceGate, GatePage

# Unlikely as a real result, finite so it never hides behind NaN handling: unwritten output elements show as this.
POISON = -1.2345678e37
MIN_FLUSH_BYTES = 256 << 20  # BENCHMARK.md's floors were measured with a 256 MB flush


@dataclass
class Timing:
    device_ms: list[float]  # CUDA-event (GPU) or host-timer (CPU) time of each run
    wall_ms: list[float]  # synchronize-bounded host time of the same runs

    @staticmethod
    def median(values: list[float]) -> float:
        ordered = sorted(values)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


_CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06


def _cuda_driver():
    """The CUDA driver library (always there where a GPU works); its calls act on torch's current primary context."""
    try:
        return ctypes.CDLL("libcuda.so.1"), "driver cuCtxResetPersistingL2Cache (libcuda.so.1)"
    except OSError as err:
        return None, f"unavailable: {err}"


def release_memory(device: torch.device):
    """Gives back what torch's allocator cached: the judge between problems and before the timed slots' memory, which
    comes from outside that cache, and the candidate on the judge's order at the same point."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


class GpuKit:
    profile = "gpu"
    timer = "cuda-events"

    def __init__(self, device: torch.device, l2_flush: bool):
        self.device = device
        self.last_split: list[float] = []
        torch.cuda.init()
        props = torch.cuda.get_device_properties(device)
        self.runner = torch.cuda.get_device_name(device)
        # Where the candidate's sandbox finds this GPU's device node (confine.py); torch builds that
        # do not say leave every node bound in.
        ids = [getattr(props, f"pci_{part}_id", None) for part in ("domain", "bus", "device")]
        self.pci_address = None if None in ids else "{:04x}:{:02x}:{:02x}.0".format(*ids)
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
        flush_bytes = max(MIN_FLUSH_BYTES, 2 * self.l2_bytes) if l2_flush else 0
        self.flush_buffer = torch.empty(flush_bytes // 4, dtype=torch.float32, device=device) if flush_bytes else None
        self._switch_in = torch.zeros(1, dtype=torch.float32, device=device)
        self.flush_bytes = flush_bytes
        torch.cuda.synchronize(device)
        self._driver, self.persisting_reset = _cuda_driver()
        if self._driver is not None:
            status = self._driver.cuCtxResetPersistingL2Cache()
            if status != 0:  # CUresult: the reset is unsupported here; the flush alone has to do
                self._driver, self.persisting_reset = None, f"unavailable: cuCtxResetPersistingL2Cache -> {status}"
        self.clear_persisting_limit()
        self._own_gate: DeviceGate | None = None  # the reference's gate (time_behind_gate), made on first use
        self._own_seq = 0

    def sync(self):
        integrity.cuda_synchronize(self.device)

    def prepare_run(self):
        """Before every timed run: drain the device, evict L2, drop any persisting-L2 lines. The judge does this
        from its own context before it lets the candidate's timed call go: the L2 is the device's, not a context's."""
        self.sync()
        if self.flush_buffer is not None:
            self.flush_buffer.fill_(1.0)
        self.reset_persisting()
        self.sync()

    def reset_persisting(self):
        if self._driver is not None:
            self._driver.cuCtxResetPersistingL2Cache()

    def take_device(self):
        """After the judge's flush, before a timed call: a one-element kernel and a synchronize put this process's
        context back on the GPU. Switching compute contexts costs the H200 about 0.13 ms (event records alone do not
        switch), and inside the timed call that switch delays the start event past the call's launch: the events then
        miss the launch the reference pays, while the synchronize-bounded wall counts the switch
        (docs/verifier-harness.md, step 8; bench/harness/class5_probe.py measured it)."""
        self._switch_in.fill_(0.0)
        self.sync()

    def time_one(self, run):
        """(CUDA-event ms, synchronize-bounded host ms, run()'s result) of one call on an idle device; where the host
        time went (``last_split``: the start event's record, the call, the end event's record, the synchronize) is
        kept for the metrics, since only the call itself is inside the events."""
        start, end = integrity.cuda_event(enable_timing=True), integrity.cuda_event(enable_timing=True)
        clock = integrity.perf_counter
        with torch.no_grad():  # entered and left outside the events: the harness's host work, not the call's
            t0 = clock()
            start.record()
            t1 = clock()
            result = run()
            t2 = clock()
            end.record()
            t3 = clock()
        self.sync()
        t4 = clock()
        self.last_split = [(t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3]
        return integrity.cuda_elapsed(start, end), (t4 - t0) * 1e3, result

    def time_behind_gate(self, run):
        """(CUDA-event ms, run()'s result) of the reference's call under version 2's rule, in the judge's own
        process: its stream held at a gate of the judge's own while the host enqueues the start event, the call and
        the end event, then opened. (The 12 references never synchronise the host, which would wait here forever.)"""
        if self._own_gate is None:
            self._own_gate = DeviceGate(GatePage.create())
        self._own_seq += 1
        stream = torch.cuda.current_stream(self.device).cuda_stream
        start, end = integrity.cuda_event(enable_timing=True), integrity.cuda_event(enable_timing=True)
        with torch.no_grad():
            self._own_gate.hold(stream, self._own_seq)
            start.record()
            result = run()
            end.record()
        self._own_gate.page.open(self._own_seq)
        self.sync()
        return integrity.cuda_elapsed(start, end), result

    def time_gated(self, gate, seq: int, run, deliver, announce, deadline: float):
        """Verifier version 2's timed call (gate.py), the candidate's half: behind the gate of call ``seq`` on this
        stream, the start event, ``run()``, the end event, ``deliver(out)`` (the output's copy into the judge's output
        region) and the done word; then ``announce()`` (the judge may draw the inputs and open the gate) and the wait
        for the stream. (CUDA-event ms, run()'s result, deliver's result.)"""
        stream = torch.cuda.current_stream(self.device).cuda_stream
        start, end = integrity.cuda_event(enable_timing=True), integrity.cuda_event(enable_timing=True)
        with torch.no_grad():
            gate.hold(stream, seq)
            try:
                start.record()
                result = run()
                end.record()
                delivered = deliver(result)
            finally:  # a call that raised still ends with its done word, behind the gate the judge opens anyway
                gate.signal(stream, seq)
        announce()
        self.sync()
        return integrity.cuda_elapsed(start, end), result, delivered

    def persisting_limit(self) -> int:
        """Bytes of L2 set aside for persisting accesses; a route that reserves any is after class 7."""
        if self._driver is None:
            return 0
        value = ctypes.c_size_t(0)
        status = self._driver.cuCtxGetLimit(ctypes.byref(value), ctypes.c_int(_CU_LIMIT_PERSISTING_L2_CACHE_SIZE))
        return int(value.value) if status == 0 else 0

    def clear_persisting_limit(self):
        if self._driver is not None:
            self._driver.cuCtxSetLimit(ctypes.c_int(_CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(0))

    def poison_free_memory(self, nbytes: int, blocks: int = 2):
        """Leave freed blocks of the output's size full of POISON in the caching allocator, so that output memory the
        candidate allocates but never writes shows as POISON instead of an old answer."""
        numel = max(1, math.ceil(nbytes / 4))
        held = [torch.full((numel,), POISON, dtype=torch.float32, device=self.device) for _ in range(blocks)]
        self.sync()
        del held


class CpuKit:
    profile = "cpu"
    timer = "host"
    runner = "cpu"
    pci_address = None
    flush_bytes = 0
    persisting_reset = "not applicable (CPU profile)"

    def __init__(self, device: torch.device):
        self.device = device
        self.last_split: list[float] = []
        # One intra-op thread: on a shared 2-core CI machine, spinning thread pools make host timings 10x noisier.
        torch.set_num_threads(1)

    def sync(self):
        pass

    def persisting_limit(self) -> int:
        return 0

    def clear_persisting_limit(self):
        pass

    def prepare_run(self):
        pass

    def reset_persisting(self):
        pass

    def time_one(self, run):
        t0 = integrity.perf_counter()
        with torch.no_grad():
            result = run()
        elapsed = (integrity.perf_counter() - t0) * 1e3
        self.last_split = [0.0, elapsed, 0.0, 0.0]  # no events: all of it is the call
        return elapsed, elapsed, result

    def time_behind_gate(self, run):
        """The CPU form of the reference's timing: the host runs the call, so a host timer measures it."""
        elapsed, _, result = self.time_one(run)
        return elapsed, result

    def time_gated(self, gate, seq: int, run, deliver, announce, deadline: float):
        """The gate's CPU form (gate.py): ``announce()`` first (nothing can be enqueued ahead on a host), then this
        host waits at the gate, runs the call, delivers its output and writes the done word itself."""
        announce()
        if not gate.wait_open(seq, deadline):
            raise TimeoutError(f"the judge never opened the gate of timed call {seq}")
        t0 = integrity.perf_counter()
        with torch.no_grad():
            result = run()
        elapsed = (integrity.perf_counter() - t0) * 1e3
        delivered = deliver(result)
        gate.signal(seq)
        return elapsed, result, delivered

    def poison_free_memory(self, nbytes: int, blocks: int = 2):
        # The host allocator often hands a just-freed chunk back for the next request of the same size.
        numel = max(1, math.ceil(nbytes / 4))
        held = [torch.full((numel,), POISON, dtype=torch.float32) for _ in range(blocks)]
        del held
