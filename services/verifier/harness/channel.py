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

import contextlib
import json
import os
import select
import socket
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


# SO_TIMESTAMPNS (Linux; Python's socket module does not name it): the kernel stamps each message it queues with the
# real time at which its sender handed it over.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
STAMPED_CHUNK = 1 << 16  # output bytes per message: a Unix socket's message must fit its sender's buffer
_STAMP = struct.Struct("qq")
_GO, _BYTES, _HEADER = b"G", b"B", b"H"
_SEED = struct.Struct(">Q")


class StampedChannel:
    """A CPU profile's timed call (timing.py): the judge's go, then the output's bytes and last its header as messages
    on a Unix SEQPACKET socket, each stamped by the kernel when the candidate handed it over. The stamp of the last
    bytes is when the output existed in full, out of the candidate's reach (the kernel holds the copy it reads): the
    judge's clock for the call stops there, however late the judge itself wakes to read it. The bytes go first so
    that nothing but handing them over is left inside that clock."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    @classmethod
    def pair(cls) -> tuple["StampedChannel", socket.socket]:
        """The judge's end, which has the kernel stamp what it receives, and the candidate's end to hand over."""
        judge, candidate = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        judge.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        return cls(judge), candidate

    # -- the judge's side ------------------------------------------------------------------------------------------
    def go(self, seed: int = 0) -> int:
        """Lets the call the candidate is ready for run, after dropping what it may have handed over before (an
        output of this call must be handed over after the go); returns the real time in ns just before the go. The
        go carries the seed of the call's inputs: they do not exist on the candidate's side before the clock runs."""
        with contextlib.suppress(BlockingIOError):
            while self.sock.recv(1 + STAMPED_CHUNK, socket.MSG_DONTWAIT):
                pass
        started = time.time_ns()
        self.sock.send(_GO + _SEED.pack(seed))
        return started

    def recv(self, deadline: float, max_payload: int, unless_readable: int) -> tuple[dict, bytearray, int] | None:
        """(header, output bytes, the stamp in ns of real time of the last bytes -- of the header where there were
        none), or None when ``unless_readable`` (the candidate's pipe: a failure, or its end) can be read first."""
        payload = bytearray()
        message = bytearray(1 + STAMPED_CHUNK)
        stamp = None
        while True:
            got = self._message(message, deadline, unless_readable)
            if got is None:
                return None
            size, stamped = got
            tag, body = bytes(message[:1]), memoryview(message)[1:size]
            if tag == _BYTES:
                if len(payload) + body.nbytes > max_payload:
                    raise ProtocolError(f"more than the {max_payload} output bytes expected")
                payload += body
                stamp = stamped
            elif tag == _HEADER:
                try:
                    header = json.loads(body.tobytes())
                except ValueError as err:
                    raise ProtocolError(f"a stamped header that is not JSON: {err}") from err
                if not isinstance(header, dict):
                    raise ProtocolError("a stamped header that is not a JSON object")
                return header, payload, stamped if stamp is None else stamp
            else:
                raise ProtocolError(f"a stamped message tagged {tag!r}")

    def _message(self, into: bytearray, deadline: float, unless_readable: int) -> tuple[int, int] | None:
        left = deadline - time.monotonic()
        ready = select.select([self.sock, unless_readable], [], [], left)[0] if left > 0 else []
        if not ready:
            raise ChannelTimeout()
        if self.sock not in ready:
            return None
        size, ancillary, flags, _ = self.sock.recvmsg_into([into], socket.CMSG_SPACE(_STAMP.size))
        if size == 0:
            raise ChannelClosed("the other side closed the stamped channel")
        if flags & socket.MSG_TRUNC:
            raise ProtocolError(f"a stamped message over {len(into)} bytes")
        stamps = [data for level, kind, data in ancillary if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS]
        if not stamps or len(stamps[0]) < _STAMP.size:  # a kernel that does not stamp: when the judge read it, later
            return size, time.time_ns()
        seconds, nanoseconds = _STAMP.unpack(stamps[0][: _STAMP.size])
        return size, seconds * 1_000_000_000 + nanoseconds

    # -- the candidate's side --------------------------------------------------------------------------------------
    def await_go(self, spin_s: float) -> int:
        """Polls for the judge's go without sleeping for up to ``spin_s``, so that the call does not start on a core
        just woken from a blocking read, then waits for it; returns the seed it carries."""
        size = len(_GO) + _SEED.size
        until = time.monotonic() + spin_s
        while True:
            try:
                message = self.sock.recv(size, socket.MSG_DONTWAIT)
                break
            except BlockingIOError:
                if time.monotonic() > until:
                    message = self.sock.recv(size)
                    break
        if len(message) != size or message[:1] != _GO:
            raise ProtocolError(f"expected the judge's go, got {message[:16]!r}")
        return _SEED.unpack(message[1:])[0]

    def send_bytes(self, payload: memoryview) -> None:
        for start in range(0, payload.nbytes, STAMPED_CHUNK):
            self.sock.sendmsg([_BYTES, payload[start : start + STAMPED_CHUNK]])

    def send_header(self, header: dict) -> None:
        self.sock.send(_HEADER + json.dumps(header).encode())


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
