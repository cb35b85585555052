"""The judge's line to the candidate process: length-prefixed JSON headers, each optionally followed by raw bytes,
and a shared memory buffer for outputs.

Nothing from the candidate side is ever unpickled or evaluated: a header is JSON (size-capped), a payload is bytes
whose length the receiver bounds, and a tensor comes back as (dtype, shape) plus its bytes -- in the shared buffer (a
memfd the judge made and both map; pinned on the GPU so that each side's copy runs at PCIe speed), or after the
header where it does not fit -- which the judge copies onto its own device at once and checks like any other
untrusted value. Copies rather than CUDA IPC: a handle the candidate controls maps memory the candidate can still
write while the judge compares it. The copies' cost is measured before route code is imported (verify.py's
calibration) and recorded in the metrics file (isolation.candidate) and bench/harness/.
"""

import fcntl
import json
import mmap
import os
import select
import struct
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


class SharedBuffer:
    """A memfd both processes map. The judge makes it empty (``new_fd``) when it starts the candidate, which inherits
    the descriptor, and gives it its size (``sized``) once its references say how large an output is; the candidate
    maps it when the judge tells it that size. The size is sealed before route code may run: a memfd truncated under
    the judge's mapping would kill the judge with SIGBUS when it copies an output out."""

    def __init__(self, fd: int, size: int):
        self.fd = fd
        self.size = size
        self.map = mmap.mmap(fd, size)
        self.pinned = False

    @staticmethod
    def new_fd() -> int:
        return os.memfd_create("kb-candidate-output", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)

    @classmethod
    def sized(cls, fd: int, size: int) -> "SharedBuffer":
        size = max(size, mmap.PAGESIZE)
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        return cls(fd, size)

    def tensor(self):
        """The buffer as a flat uint8 tensor (shares its memory), pinned for fast device copies where CUDA runs."""
        import torch

        flat = torch.frombuffer(self.map, dtype=torch.uint8)
        if torch.cuda.is_available() and not self.pinned:
            self.pinned = torch.cuda.cudart().cudaHostRegister(flat.data_ptr(), self.size, 0) == 0
        return flat
