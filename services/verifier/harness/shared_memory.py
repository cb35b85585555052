"""Memory the judge makes and the candidate maps, for what crosses between them in bulk: on the GPU in device memory,
so that nothing crosses the host.

- A timed call's inputs: the judge draws each timed call's inputs itself, into its slot's region, just before it
  lets the call go, so that they do not exist anywhere the candidate can read before its call's clock runs (p20 and
  p22: work done on the inputs before the go). The candidate's slot tensors are views of it: the same pointers on
  every timed call, new contents that nothing on the candidate side wrote. The judge never reads what the candidate
  may have written there: its references are computed from its own draw.
- Outputs: one region as large as the largest reference output, which the candidate copies every output it hands
  over into and the judge copies out of into its own memory before it compares (it never compares what route code
  can still write to). Through pinned host memory the judge's copies of rms_norm's ten 7.5 GB outputs took 1.7 s
  (about 44 GB/s); device to device a 7.5 GB output crosses in 4.0 ms each way (bench/harness/wall_probe.py;
  docs/decisions/0002).

The memory is a file descriptor the judge creates and hands over on a Unix socket (``send_region``/``recv_region``,
SCM_RIGHTS): on the GPU a CUDA virtual-memory allocation exported as a POSIX descriptor (``cuMemCreate`` with
``CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR``), which maps across bubblewrap's PID namespace and the uid drop (torch's
legacy ``cudaIpcGetMemHandle`` does not there: "mapping of buffer object failed": docs/decisions/0005); on
the CPU a memfd.
"""

import ctypes
import fcntl
import math
import mmap
import os
import socket

import torch

ALIGN = 512  # each input's offset in the region: every dtype's alignment, and a whole number of L2 sectors


class CudaError(RuntimeError):
    pass


# cuda.h (CUDA 12), the virtual memory management API.
_CU_MEM_ALLOCATION_TYPE_PINNED = 1
_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
_CU_MEM_LOCATION_TYPE_DEVICE = 1
_CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class _Driver:
    """The few driver calls a shared region needs; they act on the calling thread's current context, torch's primary
    one once torch has used the device."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def __call__(self, name: str, *args) -> None:
        status = getattr(self.lib, name)(*args)
        if status != 0:
            raise CudaError(f"{name} failed with CUresult {status}")

    def device(self) -> int:
        device = ctypes.c_int(0)
        self("cuCtxGetDevice", ctypes.byref(device))
        return device.value

    def prop(self) -> _AllocationProp:
        prop = _AllocationProp()
        prop.type = _CU_MEM_ALLOCATION_TYPE_PINNED
        prop.requestedHandleTypes = _CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        prop.location = _Location(_CU_MEM_LOCATION_TYPE_DEVICE, self.device())
        return prop

    def granularity(self, prop: _AllocationProp) -> int:
        value = ctypes.c_size_t(0)
        self(
            "cuMemGetAllocationGranularity",
            ctypes.byref(value),
            ctypes.byref(prop),
            ctypes.c_int(_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        )
        return value.value


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


class _CudaRegion:
    """A CUDA allocation mapped into this process's address space; the creator's is exported as a descriptor."""

    def __init__(self, handle: ctypes.c_ulonglong, size: int, device_index: int, fd: int, driver: _Driver):
        self.driver, self.handle, self.size, self.fd = driver, handle, size, fd
        self.pointer = ctypes.c_ulonglong(0)
        driver(
            "cuMemAddressReserve",
            ctypes.byref(self.pointer),
            ctypes.c_size_t(size),
            ctypes.c_size_t(0),
            ctypes.c_ulonglong(0),
            ctypes.c_ulonglong(0),
        )
        driver("cuMemMap", self.pointer, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, ctypes.c_ulonglong(0))
        access = _AccessDesc(
            _Location(_CU_MEM_LOCATION_TYPE_DEVICE, driver.device()), _CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        )
        driver("cuMemSetAccess", self.pointer, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1))
        interface = {"shape": (size,), "typestr": "|u1", "data": (self.pointer.value, False), "version": 3}
        self.flat = torch.as_tensor(_ArrayInterface(interface), device=torch.device("cuda", device_index))

    @classmethod
    def create(cls, nbytes: int, device: torch.device) -> "_CudaRegion":
        torch.cuda.synchronize(device)  # torch's primary context current on this thread
        driver = _Driver()
        prop = driver.prop()
        size = _round_up(max(nbytes, 1), driver.granularity(prop))
        handle = ctypes.c_ulonglong(0)
        driver("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_ulonglong(0))
        fd = ctypes.c_int(-1)
        driver(
            "cuMemExportToShareableHandle",
            ctypes.byref(fd),
            handle,
            ctypes.c_int(_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            ctypes.c_ulonglong(0),
        )
        return cls(handle, size, device.index or 0, fd.value, driver)

    @classmethod
    def open(cls, fd: int, size: int, device: torch.device) -> "_CudaRegion":
        torch.cuda.synchronize(device)
        driver = _Driver()
        handle = ctypes.c_ulonglong(0)
        driver(
            "cuMemImportFromShareableHandle",
            ctypes.byref(handle),
            ctypes.c_void_p(fd),
            ctypes.c_int(_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        )
        return cls(handle, size, device.index or 0, fd, driver)

    def close(self) -> None:
        self.flat = None
        self.driver("cuMemUnmap", self.pointer, ctypes.c_size_t(self.size))
        self.driver("cuMemAddressFree", self.pointer, ctypes.c_size_t(self.size))
        self.driver("cuMemRelease", self.handle)
        os.close(self.fd)


class _ArrayInterface:
    """What torch.as_tensor reads a device pointer from (the CUDA array interface)."""

    def __init__(self, interface: dict):
        self.__cuda_array_interface__ = interface


class _HostRegion:
    """A memfd both processes map (the CPU profile, and the GPU protocol's tests on a machine without a GPU)."""

    def __init__(self, fd: int, size: int):
        self.fd, self.size = fd, size
        self.map = mmap.mmap(fd, size)
        self.flat = torch.frombuffer(self.map, dtype=torch.uint8)

    @classmethod
    def create(cls, nbytes: int, device: torch.device) -> "_HostRegion":
        size = _round_up(max(nbytes, 1), mmap.PAGESIZE)
        fd = os.memfd_create("kb-shared", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)
        # Sealed: a file the candidate shrank under the judge's mapping would kill the judge with SIGBUS.
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        return cls(fd, size)

    @classmethod
    def open(cls, fd: int, size: int, device: torch.device) -> "_HostRegion":
        return cls(fd, size)

    def close(self) -> None:
        # Not mmap.close(): torch's views do not pin the mapping, and a view route code still holds would read
        # unmapped memory. The mapping goes with the last view (each holds the mmap object).
        self.flat = self.map = None
        os.close(self.fd)


def layout(inputs: list) -> list[dict]:
    """Where each input tensor lies in a region: its dtype, shape and byte offset (``ALIGN``-aligned)."""
    places, offset = [], 0
    for value in inputs:
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"a timed call's inputs are tensors; got {type(value).__name__}")
        places.append({"dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape), "offset": offset})
        offset = _round_up(offset + value.numel() * value.element_size(), ALIGN)
    return places


def _place_bytes(place: dict) -> int:
    return math.prod(place["shape"]) * torch.empty((), dtype=getattr(torch, place["dtype"])).element_size()


def flat_places(nbytes: int) -> list[dict]:
    """The layout of a region of ``nbytes`` plain bytes (the output region)."""
    return [{"dtype": "uint8", "shape": [nbytes], "offset": 0}]


def region_bytes(places: list[dict]) -> int:
    """The bytes a region laid out by ``places`` needs."""
    return _round_up(places[-1]["offset"] + _place_bytes(places[-1]), ALIGN) if places else ALIGN


# The memory this process made for the exchange (outside torch's allocator): live bytes and their peak since
# reset_peak_made (memory.py counts it in the process's peak).
_made = {"live": 0, "peak": 0}


def reset_peak_made() -> None:
    _made["peak"] = _made["live"]


def peak_made() -> int:
    return _made["peak"]


class Region:
    """Shared memory seen as tensors: ``tensors`` are contiguous views of it, laid out by ``places`` (a timed slot's
    inputs, or the output region's bytes)."""

    def __init__(self, region, places: list[dict]):
        self.region, self.places = region, places
        self.made_here = False  # made by this process (create), not mapped from the other's (open)
        self.tensors = []
        for place in places:
            start = place["offset"]
            view = region.flat[start : start + _place_bytes(place)]
            self.tensors.append(view.view(getattr(torch, place["dtype"])).view(place["shape"]))

    @property
    def fd(self) -> int:
        return self.region.fd

    @property
    def size(self) -> int:
        return self.region.size

    @classmethod
    def create(cls, places: list[dict], device: torch.device) -> "Region":
        kind = _CudaRegion if device.type == "cuda" else _HostRegion
        made = cls(kind.create(region_bytes(places), device), places)
        made.made_here = True
        _made["live"] += made.size
        _made["peak"] = max(_made["peak"], _made["live"])
        return made

    @classmethod
    def open(cls, fd: int, size: int, places: list[dict], device: torch.device) -> "Region":
        if size < region_bytes(places):
            raise ValueError(f"a region of {size} bytes cannot hold inputs of {region_bytes(places)}")
        kind = _CudaRegion if device.type == "cuda" else _HostRegion
        return cls(kind.open(fd, size, device), places)

    def fill(self, inputs: list) -> None:
        """The inputs' contents copied in (the judge's side; it synchronises before it lets the call go)."""
        for target, source in zip(self.tensors, inputs, strict=True):
            target.copy_(source)

    def close(self) -> None:
        self.tensors = []
        if self.made_here:
            _made["live"] -= self.size
            self.made_here = False
        self.region.close()


def send_region(sock: socket.socket, fd: int) -> None:
    socket.send_fds(sock, [b"R"], [fd])


def recv_region(sock: socket.socket) -> int:
    message, fds, _, _ = socket.recv_fds(sock, 1, 1)
    if message != b"R" or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise ValueError("expected one region's descriptor")
    return fds[0]
