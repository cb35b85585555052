"""Attack on the output hand-over: the route rewrites the runner's send_output and deliver so that every output is
announced with the right byte count but lands in a throwaway copy of the output region, leaving in the judge's memory
whatever was there before (nothing, then an earlier output). The judge must compare what it copied out, not what it
was told."""

from kernels.problems.log_softmax import Model
from tests.harness.route_rewrites import rewrite_harness_method


def _claim_without_writing(hand_over):
    def claim(self, *args, **kwargs):
        region, self.output_memory = self.output_memory, self.output_memory.clone()
        try:
            return hand_over(self, *args, **kwargs)
        finally:
            self.output_memory = region

    return claim


rewrite_harness_method("send_output", _claim_without_writing)  # a correctness call's output
rewrite_harness_method("deliver", _claim_without_writing)  # a timed call's, before its done word


class ModelNew(Model):
    pass
