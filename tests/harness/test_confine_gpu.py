"""Which GPU device nodes a confined process gets (harness/confine.py), on a host laid out like one with
several GPUs: the driver's nodes under a stand-in /dev, its per-GPU entries under a stand-in /proc/driver/nvidia/gpus.
Whether CUDA then runs on the one GPU left is for a machine with several (docs/verifier-harness.md, known limits)."""

from pathlib import Path

import pytest

from services.verifier.harness import confine
from services.verifier.harness.confine import Caps, Confinement, gpu_devices

ADDRESSES = {"0000:18:00.0": 0, "0000:3b:00.0": 1, "0000:86:00.0": 2}


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A stand-in /dev and driver entries for ``gpus`` GPUs; returns (dev, proc) directories."""

    def make(gpus: int) -> tuple[Path, Path]:
        dev, proc = tmp_path / f"{gpus}" / "dev", tmp_path / f"{gpus}" / "gpus"
        (dev / "dri").mkdir(parents=True)
        (dev / "nvidia-caps").mkdir()
        for name in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", *(f"nvidia{m}" for m in range(gpus))]:
            (dev / name).touch()
        for address, minor in list(ADDRESSES.items())[:gpus]:
            (proc / address).mkdir(parents=True)
            (proc / address / "information").write_text(
                f"Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\nGPU UUID: \t GPU-{minor}\nDevice Minor: \t {minor}\n"
            )
        monkeypatch.setattr(confine, "DEV", dev)
        monkeypatch.setattr(confine, "NVIDIA_PROC", proc)
        return dev, proc

    return make


def test_on_a_host_of_several_gpus_only_its_own_node_and_the_drivers_shared_ones_are_bound(host):
    dev, proc = host(3)
    nodes, entry = gpu_devices("0000:3b:00.0")
    assert nodes == [str(dev / n) for n in ("nvidia-uvm", "nvidia-uvm-tools", "nvidia1", "nvidiactl")]
    assert entry == str(proc / "0000:3b:00.0")


def test_with_one_gpu_or_its_own_unknown_every_node_is_bound_as_before(host):
    dev, _ = host(1)
    assert gpu_devices("0000:18:00.0") == (
        [str(dev / n) for n in ("nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "nvidiactl", "dri")],
        None,
    )
    dev, _ = host(3)
    for unknown in (None, "0000:af:00.0"):
        nodes, entry = gpu_devices(unknown)
        assert entry is None and {f"nvidia{m}" for m in range(3)} <= {Path(n).name for n in nodes}


def test_the_sandbox_hides_the_other_gpus_driver_entries_and_cuda_numbers_its_own_zero(host):
    dev, proc = host(3)
    confinement = Confinement(Caps(), gpu=True, gpu_pci="0000:86:00.0", bwrap="bwrap")
    args = confinement._bwrap_args()
    bound = [args[i + 1] for i, a in enumerate(args) if a == "--dev-bind"]
    assert str(dev / "nvidia2") in bound and str(dev / "nvidia0") not in bound and str(dev / "nvidia1") not in bound
    hide = args.index("--tmpfs", args.index("--proc"))
    own = str(proc / "0000:86:00.0")
    assert args[hide + 1 : hide + 5] == [str(proc), "--ro-bind", own, own]
    assert confinement.one_gpu and confinement.describe()["gpu_nodes"] == bound
    assert not Confinement(Caps(), gpu=True, gpu_pci="0000:86:00.0", bwrap=None).one_gpu  # nothing is bound there
