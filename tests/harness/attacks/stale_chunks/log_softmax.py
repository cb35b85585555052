"""Attack on the chunked hand-over of a large output: the route finds the candidate's table of orders (on the heap,
through gc) and answers every chunk order after the first with the right byte count but without writing the chunk,
leaving in the shared buffer whatever was there. The judge must compare what it copied out, not what it was told."""

import gc
import types

from kernels.problems.log_softmax import Model


def _claim_without_writing(self, order):
    flat, offset = self.handing_over, int(order["offset"])
    size = self.shared.numel() // 2
    self.channel.send({"ok": True, "shared": min(size, flat.numel() - offset)})


for _table in gc.get_objects():
    if isinstance(_table, dict) and isinstance(_table.get("chunk"), types.MethodType) and "keep" in _table:
        _table["chunk"] = types.MethodType(_claim_without_writing, _table["chunk"].__self__)


class ModelNew(Model):
    pass
