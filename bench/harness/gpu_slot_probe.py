"""On a host of several GPUs, does a candidate confined to its slot's GPU see that GPU and no other?

The harness binds into the candidate's sandbox only the device node of the judge's GPU and the driver's shared nodes,
and hides the other GPUs' /proc/driver/nvidia/gpus entries (harness/confine.py, ``gpu_devices``): without
that, a process route code starts without CUDA_VISIBLE_DEVICES can open every GPU and load the ones other checks time
on. Tested on the CPU only by the arguments it builds (tests/harness/test_confine_gpu.py); this probe runs it. For each
GPU of the host, confined to that GPU's PCI address the way the harness does it, a child reports what CUDA shows it
(device count, the PCI address and name of device 0, a kernel run there) and which /dev/nvidia<N> it can open; the
probe then says whether each child saw exactly its own GPU.

usage (root, bubblewrap and the job user present: bench/harness/gpu_prepare.sh):
    python3 bench/harness/gpu_slot_probe.py OUT.json
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from services.verifier.harness.confine import Caps, Confinement, interpreter_paths, nvidia_nodes  # noqa: E402

CHILD = r"""
import glob, json, os
import torch
seen = {"device_count": torch.cuda.device_count(), "opened": []}
for node in sorted(glob.glob("/dev/nvidia[0-9]*")):
    try:
        os.close(os.open(node, os.O_RDWR))
        seen["opened"].append(node)
    except OSError as err:
        seen.setdefault("refused", {})[node] = err.strerror
if seen["device_count"]:
    props = torch.cuda.get_device_properties(0)
    seen["pci"] = "{:04x}:{:02x}:{:02x}.0".format(props.pci_domain_id, props.pci_bus_id, props.pci_device_id)
    seen["name"] = props.name
    seen["kernel"] = float((torch.ones(1024, device="cuda") * 2).sum())
seen["driver_entries"] = sorted(os.listdir("/proc/driver/nvidia/gpus"))
print(json.dumps(seen))
"""


def pci_addresses() -> list[str]:
    import torch

    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        found.append(f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0")
    return found


def main() -> None:
    out = Path(sys.argv[1])
    report = {"nodes": [str(p) for p in nvidia_nodes()[0]], "slots": {}}
    for index, address in enumerate(pci_addresses()):
        confinement = Confinement.prepare(
            Caps(), name=f"kb-gpu-slot-{index}", visible=[str(ROOT), *interpreter_paths()], gpu=True, gpu_pci=address
        )
        try:
            done = subprocess.run(
                confinement.command([sys.executable, "-c", CHILD]),
                capture_output=True,
                text=True,
                timeout=120,
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", **confinement.scratch_env()},
            )
        finally:
            confinement.close()
        lines = done.stdout.strip().splitlines()
        seen = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
        report["slots"][address] = {
            "confinement": confinement.describe(),
            "exit": done.returncode,
            "seen": seen,
            "stderr_tail": done.stderr[-800:],
            "only_its_own": bool(
                seen and seen["device_count"] == 1 and seen.get("pci") == address and len(seen["opened"]) == 1
            ),
        }
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps({a: s["only_its_own"] for a, s in report["slots"].items()}))


if __name__ == "__main__":
    main()
