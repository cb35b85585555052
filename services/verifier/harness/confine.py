"""Confining one untrusted process: a route's candidate in a check, a job's step. Stdlib only: the verifier's harness
imports it on the GPU machine, which has none of the services' dependencies.

``confined_command(argv, ...)`` wraps a command so that it runs
- as the job user (``kb-job``, ``KB_JOB_USER``): a real uid dropped with ``setpriv --reuid/--regid --clear-groups``
  outside any user namespace (a uid inside a user namespace started by root maps back to root), every capability
  dropped, no_new_privs, killed with its parent;
- inside bubblewrap: read-only host, no network, its own PID/IPC/UTS namespaces, /tmp and /dev/shm size-capped
  tmpfs (its only writable places: the disk cap, each), the hidden directories covered by empty tmpfs, what it
  needs bound back read-only and a hidden directory inside that covered again (one plan for both sandboxes:
  services/common/mounts.py), the GPU device nodes bound in when /dev/nvidia* exist;
- in a cgroup of its own (v2 where the unified hierarchy has the memory and pids controllers, else v1's memory and
  pids hierarchies) capping memory and processes, and under rlimits for what cgroups do not cap (file size, CPU
  time, open files, core files) and as the fallback where no cgroup can be made (process count, and memory: the
  address space, or with CUDA the private writable memory).

Each layer is used where this machine allows it and ``Confinement.describe()`` says which were, so that a result can
state what its untrusted part ran under. Wall time is the caller's to enforce (it owns the process).
"""

import contextlib
import functools
import os
import pwd
import resource
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from services.common.mounts import MountPlan, Unconfinable, existing, mount_plan

JOB_USER = os.environ.get("KB_JOB_USER", "kb-job")
CGROUP_ROOT = Path("/sys/fs/cgroup")
DEV = Path("/dev")
NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")
# Scratch space the confined process may write (its /tmp), also where HOME and caches point.
SCRATCH = "/tmp"
# Covered by empty tmpfs: root's home and the machine's shared places (sockets, other processes' files), then its own
# scratch; the two it may write are capped like its disk.
COVERED = ("/root", "/run", "/var/tmp", "/dev/shm", SCRATCH)
WRITABLE = ("/dev/shm", SCRATCH)


@dataclass(frozen=True)
class Caps:
    memory_bytes: int = 16 << 30
    pids: int = 256
    file_bytes: int = 1 << 30
    disk_bytes: int = 2 << 30  # the size of its /tmp
    cpu_s: int = 3600
    open_files: int = 1024


def job_ids(name: str = JOB_USER) -> tuple[int, int] | None:
    """(uid, gid) of the job user, or None when it does not exist here."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


_BWRAP_PROBE: list = []


def usable_bwrap() -> tuple[str | None, str]:
    """(bubblewrap's path, "") where it works here, else (None, why not); tried once per process (some sandboxed
    kernels, gVisor's say, refuse what it needs)."""
    if not _BWRAP_PROBE:
        path = shutil.which("bwrap")
        if path is None:
            _BWRAP_PROBE.append((None, "no bubblewrap"))
        else:
            import subprocess

            probe = [path, "--die-with-parent", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/"]
            probe += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", "true"]
            try:
                done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
                ok, err = done.returncode == 0, done.stderr.strip()[:200]
            except (OSError, subprocess.SubprocessError) as error:
                ok, err = False, str(error)[:200]
            _BWRAP_PROBE.append((path, "") if ok else (None, f"bubblewrap fails here ({err})"))
    return _BWRAP_PROBE[0]


def gpu_minor(pci_address: str) -> int | None:
    """The minor of the GPU at ``pci_address`` ("0000:dc:00.0"), its /dev/nvidia<minor>, from the driver's entry."""
    with contextlib.suppress(OSError, ValueError):
        for line in (NVIDIA_PROC / pci_address / "information").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Device Minor":
                return int(value)
    return None


def nvidia_nodes() -> tuple[list[Path], list[Path]]:
    """The NVIDIA driver's device nodes, and those of them that are one GPU's (/dev/nvidia<minor>)."""
    nodes = sorted(p for p in DEV.glob("nvidia*") if not p.is_dir())
    return nodes, [p for p in nodes if p.name.removeprefix("nvidia").isdigit()]


def gpu_devices(pci_address: str | None = None) -> tuple[list[str], str | None]:
    """The GPU device nodes to bind in, and the one entry of /proc/driver/nvidia/gpus to leave visible (None: all).
    Every node, unless the host has several GPUs and ``pci_address`` names the one the process may use: then that
    GPU's node and the driver's shared ones (nvidiactl, nvidia-uvm, ...), not /dev/dri (every GPU's render nodes,
    which CUDA does not use), and that GPU's entry only, as the NVIDIA container toolkit does: a process that ignores
    CUDA_VISIBLE_DEVICES cannot open the GPUs other checks time on."""
    nodes, gpus = nvidia_nodes()
    minor = gpu_minor(pci_address) if pci_address and len(gpus) > 1 else None
    if minor is None:
        return [str(p) for p in nodes] + ([str(DEV / "dri")] if (DEV / "dri").is_dir() and nodes else []), None
    kept = [p for p in nodes if p not in gpus or p.name == f"nvidia{minor}"]
    return [str(p) for p in kept], str(NVIDIA_PROC / pci_address)


class Cgroup:
    """One cgroup capping memory and processes; v2 when the unified hierarchy offers both controllers, else v1."""

    def __init__(self, version: int, dirs: dict[str, Path], caps: Caps):
        self.version = version
        self.dirs = dirs  # controller ("memory", "pids", or "" for v2) -> directory
        self.caps = caps
        self.reported: dict[str, int] = {}  # each cap's counter when exceeded() was last asked

    @classmethod
    def create(cls, name: str, caps: Caps) -> "Cgroup | None":
        """A fresh cgroup named ``name`` under this process's own (so the parent's caps still hold), or None where
        none can be made (no cgroupfs, not writable)."""
        for make in (cls._create_v2, cls._create_v1):
            with contextlib.suppress(OSError):
                group = make(name, caps)
                if group is not None:
                    return group
        return None

    @staticmethod
    def _own(controller: str) -> str:
        """This process's cgroup path in the hierarchy of ``controller`` ("" for v2), from /proc/self/cgroup."""
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if (controller == "" and controllers == "") or controller in controllers.split(","):
                return path.lstrip("/")
        return ""

    @classmethod
    def _create_v2(cls, name: str, caps: Caps) -> "Cgroup | None":
        root = CGROUP_ROOT if (CGROUP_ROOT / "cgroup.controllers").exists() else CGROUP_ROOT / "unified"
        if not {"memory", "pids"} <= set((root / "cgroup.controllers").read_text().split()):
            return None
        parent = root / cls._own("")
        if not (parent / "cgroup.subtree_control").exists():
            return None
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
        if not {"memory", "pids"} <= enabled:
            (parent / "cgroup.subtree_control").write_text("+memory +pids")
        path = parent / name
        path.mkdir(exist_ok=True)
        (path / "memory.max").write_text(str(caps.memory_bytes))
        with contextlib.suppress(OSError):
            (path / "memory.swap.max").write_text("0")
        (path / "pids.max").write_text(str(caps.pids))
        return cls(2, {"": path}, caps)

    @classmethod
    def _create_v1(cls, name: str, caps: Caps) -> "Cgroup | None":
        dirs = {}
        for controller in ("memory", "pids"):
            base = CGROUP_ROOT / controller
            if not (base / "cgroup.procs").exists():
                return None
            parent = base / cls._own(controller)
            path = (parent if parent.is_dir() else base) / name
            path.mkdir(exist_ok=True)
            dirs[controller] = path
        (dirs["memory"] / "memory.limit_in_bytes").write_text(str(caps.memory_bytes))
        with contextlib.suppress(OSError):  # without swap accounting there is no memsw file
            (dirs["memory"] / "memory.memsw.limit_in_bytes").write_text(str(caps.memory_bytes))
        (dirs["pids"] / "pids.max").write_text(str(caps.pids))
        return cls(1, dirs, caps)

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def _read(self, controller: str, name: str) -> str:
        try:
            return (self.dirs[controller] / name).read_text()
        except (OSError, KeyError):
            return ""

    @staticmethod
    def _field(text: str, key: str) -> int:
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
        return 0

    def exceeded(self) -> list[str]:
        """The caps this group ran into since the last time it was asked, named for a failure reason: its counters
        never go down, and one process may fail several times (a route whose allocation failed on one problem and
        that crashes on the next did not run into its memory cap again)."""
        memory, pids = ("", "") if self.version == 2 else ("memory", "pids")
        if self.version == 2:
            events = self._read(memory, "memory.events")
            oom = self._field(events, "oom_kill") + self._field(events, "max")
        else:
            oom = self._field(self._read(memory, "memory.oom_control"), "oom_kill") + int(
                self._read(memory, "memory.failcnt").strip() or 0
            )
        counts = {
            f"its memory cap ({self.caps.memory_bytes >> 20} MiB)": oom,
            f"its process cap ({self.caps.pids} processes)": self._field(self._read(pids, "pids.events"), "max"),
        }
        found = [name for name, count in counts.items() if count > self.reported.get(name, 0)]
        self.reported.update(counts)
        return found

    def pids(self) -> list[int]:
        text = self._read("" if self.version == 2 else "pids", "cgroup.procs")
        return [int(p) for p in text.split()]

    def kill_all(self) -> None:
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def remove(self) -> None:
        self.kill_all()
        for path in self.dirs.values():
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # still emptying
                    time.sleep(0.02)


@dataclass
class Confinement:
    """How to start one confined process, and what it got; ``command(argv)`` is the wrapped command line."""

    caps: Caps
    hidden: list[str] = field(default_factory=list)  # covered by empty tmpfs (the judge's files, KB_HOME, tokens)
    visible: list[str] = field(default_factory=list)  # bound back read-only (the code it runs, its inputs)
    gpu: bool = False
    gpu_pci: str | None = None  # the PCI address of the GPU it may use: on a host of several, it gets only that one
    name: str = "kb-confined"
    memory_rlimit: bool = True  # where no cgroup can be made (False: the caller found it stops the process starting)
    ids: tuple[int, int] | None = None
    bwrap: str | None = None
    cgroup: Cgroup | None = None
    notes: list[str] = field(default_factory=list)  # what could not be applied here, for the result

    @classmethod
    def prepare(
        cls,
        caps: Caps,
        *,
        name: str,
        hidden=(),
        visible=(),
        gpu: bool = False,
        gpu_pci: str | None = None,
        memory_rlimit: bool = True,
    ) -> "Confinement":
        """Decides the layers this machine allows. As root, the job user must exist: untrusted code never runs as
        root (LookupError otherwise), and the layout must be one its mounts confine (Unconfinable otherwise)."""
        self = cls(caps, list(hidden), list(visible), gpu, gpu_pci, name, memory_rlimit)
        if os.geteuid() == 0:
            self.ids = job_ids()
            if self.ids is None:
                raise LookupError(
                    f"the job user {JOB_USER} does not exist: untrusted code never runs as root "
                    "(make up and .ci/run create it; or: useradd --system --no-create-home kb-job)"
                )
            self.bwrap, why = usable_bwrap()
            if self.bwrap is None:
                self.notes.append(f"{why}: host not read-only for the candidate, network not unshared")
            elif self.mounts.unconfinable:
                raise Unconfinable(self.mounts.unconfinable)
            elif gpu and not self.one_gpu and len(nvidia_nodes()[1]) > 1:
                self.notes.append("several GPUs here, its own not found in the driver's entries: every one bound in")
            self.cgroup = Cgroup.create(f"{name}-{os.getpid()}", caps)
            if self.cgroup is None:
                memory = self.memory_limit or "none"
                if memory == "RLIMIT_DATA":
                    memory += ", which counts private writable memory only"
                why = f"no writable cgroup: the process cap from RLIMIT_NPROC, the memory cap from {memory}"
                self.notes.append(why)
        else:
            self.notes.append("not started as root: the candidate runs as the caller's uid, without bubblewrap")
        return self

    @property
    def memory_limit(self) -> str | None:
        """The rlimit that caps memory where no cgroup does: RLIMIT_AS, or with CUDA, whose driver reserves far more
        address space than it uses, RLIMIT_DATA (private writable mappings: not the driver's reservations, which are
        PROT_NONE, nor its shared mappings of the device)."""
        if self.cgroup is not None or not self.memory_rlimit:
            return None
        return "RLIMIT_DATA" if self.gpu else "RLIMIT_AS"

    @functools.cached_property
    def gpu_binding(self) -> tuple[list[str], str | None]:
        """``gpu_devices`` for its GPU, looked up once: what its sandbox binds in and the driver entry it keeps."""
        return gpu_devices(self.gpu_pci) if self.gpu and self.bwrap else ([], None)

    @property
    def one_gpu(self) -> bool:
        """Whether its sandbox holds only the node of the GPU it may use (then CUDA numbers that GPU 0 in it)."""
        return self.gpu_binding[1] is not None

    def describe(self) -> dict:
        return {
            "uid": self.ids[0] if self.ids else os.geteuid(),
            "user": JOB_USER if self.ids else "caller",
            "bubblewrap": bool(self.bwrap),
            "cgroup": f"v{self.cgroup.version}" if self.cgroup else None,
            "memory_rlimit": self.memory_limit,
            "gpu_nodes": self.gpu_binding[0] if self.gpu and self.bwrap else None,
            "caps": {
                "memory_bytes": self.caps.memory_bytes,
                "pids": self.caps.pids,
                "file_bytes": self.caps.file_bytes,
                "disk_bytes": self.caps.disk_bytes,
                "cpu_s": self.caps.cpu_s,
            },
            "notes": list(self.notes),
        }

    def _bwrap_args(self) -> list[str]:
        args = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc"]
        args += ["--unshare-net", "--unshare-uts", "--unshare-cgroup-try", "--ro-bind", "/", "/"]
        args += ["--dev", "/dev", "--proc", "/proc"]
        if self.gpu:
            nodes, own_entry = self.gpu_binding
            for dev in nodes:
                args += ["--dev-bind", dev, dev]
            if own_entry:  # the other GPUs' driver entries hidden, its own bound back
                args += ["--tmpfs", str(NVIDIA_PROC), "--ro-bind", own_entry, own_entry]
        plan = self.mounts
        if plan.unconfinable:
            raise Unconfinable(plan.unconfinable)
        for path in plan.covers:  # root's and empty, but /tmp and /dev/shm: writable and capped, each
            writable = ["--perms", "1777", "--size", str(self.caps.disk_bytes)] if path in WRITABLE else []
            args += [*writable, "--tmpfs", path]
        # What the process needs from under a covered directory goes back on top, read-only, and what must stay
        # hidden inside that is covered again.
        for path in plan.bind_backs:
            args += self._bind_back(path, plan.covers)
        for path in plan.recovers:
            args += ["--tmpfs", path]
        return [*args, "--chdir", SCRATCH, "--"]

    @functools.cached_property
    def mounts(self) -> MountPlan:
        """What its bubblewrap covers, binds back and covers again (services/common/mounts.py), decided once."""
        covered = [p for p in COVERED if os.path.isdir(p)]
        return mount_plan(covered, existing(self.hidden, os.path.isdir), existing(self.visible))

    @staticmethod
    def _bind_back(path: str, covered: tuple[str, ...]) -> list[str]:
        """A read-only bind of ``path`` on top of the tmpfs covering it, its parents made traversable (bubblewrap
        would make them 0700, root's, and the job user could not reach it)."""
        cover = max((c for c in covered if Path(path).is_relative_to(c)), key=len)
        args = []
        for parent in reversed(Path(path).parents):
            if parent.is_relative_to(cover) and parent != Path(cover):
                args += ["--perms", "0755", "--dir", str(parent)]
        return [*args, "--ro-bind", path, path]

    def command(self, argv: list[str]) -> list[str]:
        limits = ["prlimit", "--core=0", _limit("fsize", self.caps.file_bytes), _limit("nofile", self.caps.open_files)]
        limits.append(_limit("cpu", self.caps.cpu_s))
        if self.cgroup is None and self.ids is not None:  # counted per uid: only the job user's own are meant
            limits.append(_limit("nproc", self.caps.pids))
        if self.memory_limit is not None:
            limits.append(_limit(self.memory_limit.removeprefix("RLIMIT_").lower(), self.caps.memory_bytes))
        inner = [*limits, "--", *argv]
        if self.ids is not None:
            uid, gid = self.ids
            inner = [
                "setpriv",
                f"--reuid={uid}",
                f"--regid={gid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--pdeathsig=KILL",
                "--",
                *inner,
            ]
        if self.bwrap:
            inner = [*self._bwrap_args(), *inner]
        if self.cgroup is not None:
            # Joins the cgroup before anything of the confined command runs (as root, before the uid drop).
            join = 'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; shift; done; shift; exec "$@"'
            inner = ["sh", "-c", join, "sh", *self.cgroup.procs_files, "--", *inner]
        return inner

    def scratch_env(self) -> dict[str, str]:
        """HOME, TMPDIR and caches in its scratch space."""
        base = SCRATCH if self.bwrap else os.environ.get("TMPDIR", "/tmp")
        return {"HOME": f"{base}/home", "TMPDIR": base, "TRITON_CACHE_DIR": f"{base}/triton"}

    def exceeded(self) -> list[str]:
        """The caps its processes ran into, named for a failure reason. Without a cgroup the process cap is
        RLIMIT_NPROC, whose count is every task of the job user: at the cap while they still run (the caller asks
        before it kills them)."""
        if self.cgroup is not None:
            return self.cgroup.exceeded()
        cap = _capped("nproc", self.caps.pids)
        if self.ids is not None and tasks_of(self.ids[0]) >= cap:
            return [f"its process cap ({cap} processes)"]
        return []

    def close(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()


def _capped(name: str, value: int) -> int:
    """``value``, never above the limit this process already has (lowering needs no privilege, raising would fail: a
    check's sandbox has set its own)."""
    _, hard = resource.getrlimit(getattr(resource, f"RLIMIT_{name.upper()}"))
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def _limit(name: str, value: int) -> str:
    """prlimit's option for ``value``."""
    return f"--{name}={_capped(name, value)}"


def tasks_of(uid: int) -> int:
    """How many tasks (threads) run as ``uid`` on this machine: what RLIMIT_NPROC counts."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"])
    return count


def interpreter_paths() -> list[str]:
    """What running this Python needs to see: its prefixes (a venv's interpreter links into the base install)."""
    return list(dict.fromkeys([sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)]))
