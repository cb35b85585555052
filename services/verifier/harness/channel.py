"""The judge's line to the candidate process: length-prefixed JSON headers, each optionally followed by raw bytes.

Nothing from the candidate side is ever unpickled or evaluated: a header is JSON (size-capped), a payload is bytes
whose length the receiver bounds, and a tensor comes back as (dtype, shape) plus its bytes -- in the output region,
memory the judge made and the candidate maps (shared_memory.py: device memory on the GPU) -- which the judge copies
into its own memory at once and checks like any other untrusted value: the candidate can still write the region
while the judge compares, the judge's copy it cannot. The copy's cost is measured before route code is imported
(candidate_process.CandidateProcess.calibrate) and recorded in the metrics file (isolation.candidate) and
bench/harness/. A CPU profile's timed call answers on a socket the kernel stamps instead (StampedChannel). What it
prints the judge keeps only as a bounded tail (OutputTail), for failure reasons.
"""

import json
import os
import select
import struct
import threading
import time

MAX_HEADER_BYTES = 1 << 20
_LENGTH = struct.Struct(">I")


class ChannelClosed(Exception):
    """The other side closed its end (exited, crashed, was killed)."""


class ChannelTimeout(Exception):
    """No complete message before the deadline."""


class ProtocolError(Exception):
    """A message the receiver cannot accept (too large, not JSON, not a dict)."""


class Channel:
    def __init__(self, read_fd: int, write_fd: int):
        self.read_fd = read_fd
        self.write_fd = write_fd

    def send(self, header: dict, payload=None) -> None:
        if payload is not None:
            payload = memoryview(payload).cast("B")
            header = {**header, "nbytes": payload.nbytes}
        body = json.dumps(header).encode()
        self._write(_LENGTH.pack(len(body)) + body)
        if payload is not None:
            self._write(payload)

    def _write(self, data) -> None:
        view = memoryview(data)
        while view.nbytes:
            try:
                written = os.write(self.write_fd, view)
            except BrokenPipeError as err:
                raise ChannelClosed("the other side closed the channel") from err
            view = view[written:]

    def recv(
        self, deadline: float | None = None, max_payload: int = 0, spin_s: float = 0.0
    ) -> tuple[dict, bytearray | None]:
        """The next message; ``deadline`` is a time.monotonic() value; a payload over ``max_payload`` bytes is a
        ProtocolError (the judge says how much it expects). ``spin_s``: poll without sleeping that long first, so
        that a timed call does not start on a core just woken from a blocking read."""
        if spin_s:
            until = time.monotonic() + spin_s
            while not select.select([self.read_fd], [], [], 0)[0] and time.monotonic() < until:
                pass
        (length,) = _LENGTH.unpack(self._read(_LENGTH.size, deadline))
        if length > MAX_HEADER_BYTES:
            raise ProtocolError(f"a header of {length} bytes (limit {MAX_HEADER_BYTES})")
        try:
            header = json.loads(self._read(length, deadline))
        except ValueError as err:
            raise ProtocolError(f"a header that is not JSON: {err}") from err
        if not isinstance(header, dict):
            raise ProtocolError("a header that is not a JSON object")
        nbytes = header.get("nbytes")
        if nbytes is None:
            return header, None
        if not isinstance(nbytes, int) or nbytes < 0 or nbytes > max_payload:
            raise ProtocolError(f"a payload of {nbytes!r} bytes where at most {max_payload} were expected")
        return header, self._read(nbytes, deadline)

    def readable(self, timeout_s: float) -> bool:
        """Whether a message has begun to arrive within ``timeout_s`` (the gate's wait for "enqueued")."""
        return bool(select.select([self.read_fd], [], [], max(timeout_s, 0.0))[0])

    def _read(self, count: int, deadline: float | None) -> bytearray:
        buffer = bytearray(count)
        view = memoryview(buffer)
        got = 0
        while got < count:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                    raise ChannelTimeout()
            chunk = os.readv(self.read_fd, [view[got:]])
            if chunk == 0:
                raise ChannelClosed("the other side closed the channel")
            got += chunk
        return buffer


class OutputTail:
    """What a process writes to its stdout and stderr, read off a pipe as it comes and kept only as the last ``keep``
    bytes, in memory: a file would put as much of it on the judge's disk as route code cares to write."""

    def __init__(self, keep: int = 64 << 10):
        self.keep = keep
        self.read_fd, self.write_fd = os.pipe()
        self._tail = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._drain, name="candidate-output", daemon=True)

    def start(self) -> None:
        """Once the process holds the write end: the pipe ends when every process that inherited it has."""
        os.close(self.write_fd)
        self._reader.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self.read_fd, 1 << 16):
                with self._lock:
                    self._tail += chunk
                    del self._tail[: -self.keep]
        finally:
            os.close(self.read_fd)

    def text(self, size: int, wait_s: float = 0.5) -> str:
        """The last ``size`` bytes, as text; waits up to ``wait_s`` for what an ended process left in the pipe."""
        self._reader.join(wait_s)
        with self._lock:
            return bytes(self._tail[-size:]).decode("utf-8", "replace").strip()
