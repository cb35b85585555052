"""Verifier version 2's gate: the judge holds each timed call behind a flag, and learns from the device when it ended.

NVBench's cold measurement holds the stream with a blocking kernel while the host enqueues the start event, the call
and the end event, then releases it, so that the events time the device executing the call and not the host launching
it. Here the candidate enqueues, on its stream, a wait on a word of a page of host memory that both processes map
(``cuStreamWaitValue32``: no kernel spins on an SM, so the judge's own device work -- drawing the inputs, the L2 flush
-- runs while the call is held), then the start event, the call, the end event, the copy of the output into the judge's
output region, and a write of the call's sequence number into the page's done word (``cuStreamWriteValue32``). The
judge draws the call's inputs only after the candidate said it has enqueued (no work on them can start before), flushes
the L2, opens the gate with a host store and spins until the device's done word arrives: its own clock from the open to
the done, less what an empty call costs (calibrated before route code is imported), is what it can vouch for.

The candidate's host could write the done word early (it maps the page): that makes the judge's clock short, never the
output ready. The judge copies the output region the moment the done word arrives and finds it poisoned or late (the
copy waits on the candidate's context while its work still runs), so a forged done is a lazy output (timing.py).

CPU form (the CPU profile, and the tests of the protocol on machines without a GPU): the same page and the same judge;
the candidate says it has enqueued, then spins on the gate word with its host, runs the call, copies the output and
writes the done word itself. What that measures is the host's execution of the call, launch included.
"""

import ctypes
import mmap
import os
import time

WORD = 4
GATE_OFFSET = 0  # the judge writes a call's sequence number here to open its gate
DONE_OFFSET = 64  # the device (CPU form: the candidate's host) writes it here when the call and its output are done
PAGE_BYTES = mmap.PAGESIZE

_CU_MEMHOSTREGISTER_DEVICEMAP = 0x02
_CU_STREAM_WAIT_VALUE_GEQ = 0x0
_CU_STREAM_WRITE_VALUE_DEFAULT = 0x0


class GateError(RuntimeError):
    pass


class GatePage:
    """One page of shared host memory with the gate and done words; sequence numbers only grow, so a word left over
    from an earlier call never opens a later one."""

    def __init__(self, fd: int):
        self.fd = fd
        self.map = mmap.mmap(fd, PAGE_BYTES)
        self._gate = ctypes.c_uint32.from_buffer(self.map, GATE_OFFSET)
        self._done = ctypes.c_uint32.from_buffer(self.map, DONE_OFFSET)

    @classmethod
    def create(cls) -> "GatePage":
        fd = os.memfd_create("kb-gate", os.MFD_CLOEXEC)
        os.ftruncate(fd, PAGE_BYTES)
        return cls(fd)

    def address(self, offset: int) -> int:
        return ctypes.addressof(ctypes.c_char.from_buffer(self.map, offset))

    def open(self, seq: int) -> float:
        """Opens the gate of call ``seq``; the judge's clock at the open."""
        self._gate.value = seq
        return time.perf_counter()

    def is_open(self, seq: int) -> bool:
        return self._gate.value >= seq

    def signal(self, seq: int) -> None:
        """The CPU form's done: written by the candidate's host after the call and its output."""
        self._done.value = seq

    def wait_done(self, seq: int, deadline: float, yield_every: int = 0x100000) -> float | None:
        """The judge's clock when the done word of call ``seq`` arrived, or None at ``deadline`` (time.monotonic).
        ``yield_every``: spins between gives of the core (the CPU form's candidate needs it often on a small host)."""
        done, clock = self._done, time.perf_counter
        spins = 0
        while done.value < seq:
            spins += 1
            if spins % yield_every == 0:
                os.sched_yield()
            if spins & 0xFFF == 0 and time.monotonic() > deadline:
                return None
        return clock()

    def wait_open(self, seq: int, deadline: float) -> bool:
        """The CPU form's gate: the candidate's host waits until the judge opens it (False at the deadline), giving
        its core back on every look: the judge needs one to draw the inputs."""
        gate = self._gate
        spins = 0
        while gate.value < seq:
            spins += 1
            os.sched_yield()
            if spins & 0xFF == 0 and time.monotonic() > deadline:
                return False
        return True

    def close(self) -> None:
        del self._gate, self._done
        self.map.close()
        os.close(self.fd)


class DeviceGate:
    """The candidate's GPU side of the page: registered as mapped host memory, waited on and written by its stream
    through the CUDA driver's stream memory operations."""

    def __init__(self, page: GatePage):
        self.page = page
        try:
            self.cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as err:
            raise GateError(f"no CUDA driver for the gate: {err}") from err
        self._wait = _driver_function(self.cuda, "cuStreamWaitValue32")
        self._write = _driver_function(self.cuda, "cuStreamWriteValue32")
        base = page.address(0)
        _check(
            self.cuda.cuMemHostRegister_v2(
                ctypes.c_void_p(base), ctypes.c_size_t(PAGE_BYTES), ctypes.c_uint(_CU_MEMHOSTREGISTER_DEVICEMAP)
            ),
            "cuMemHostRegister",
        )
        self.registered = base
        device_base = ctypes.c_uint64(0)
        _check(
            self.cuda.cuMemHostGetDevicePointer_v2(ctypes.byref(device_base), ctypes.c_void_p(base), 0),
            "cuMemHostGetDevicePointer",
        )
        self.gate_ptr = device_base.value + GATE_OFFSET
        self.done_ptr = device_base.value + DONE_OFFSET

    def hold(self, stream: int, seq: int) -> None:
        """Enqueues on ``stream`` (a CUstream handle) a wait until the judge opens call ``seq``'s gate."""
        _check(
            self._wait(
                ctypes.c_void_p(stream),
                ctypes.c_uint64(self.gate_ptr),
                ctypes.c_uint32(seq),
                ctypes.c_uint(_CU_STREAM_WAIT_VALUE_GEQ),
            ),
            "cuStreamWaitValue32",
        )

    def signal(self, stream: int, seq: int) -> None:
        """Enqueues on ``stream`` the device's write of call ``seq``'s done word, after everything before it."""
        _check(
            self._write(
                ctypes.c_void_p(stream),
                ctypes.c_uint64(self.done_ptr),
                ctypes.c_uint32(seq),
                ctypes.c_uint(_CU_STREAM_WRITE_VALUE_DEFAULT),
            ),
            "cuStreamWriteValue32",
        )

    def close(self) -> None:
        if self.registered:
            self.cuda.cuMemHostUnregister(ctypes.c_void_p(self.registered))
            self.registered = 0


def _driver_function(cuda, name: str):
    for symbol in (f"{name}_v2", name):
        function = getattr(cuda, symbol, None)
        if function is not None:
            return function
    raise GateError(f"the CUDA driver has no {name}")


def _check(status: int, what: str) -> None:
    if status != 0:
        raise GateError(f"{what} failed: CUresult {status}")
