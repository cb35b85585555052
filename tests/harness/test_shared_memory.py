"""The memory a GPU timed call's inputs are drawn into (services/verifier/harness/shared_memory.py), tested here with
its CPU form, a memfd: the same layout, handover and views as the CUDA allocation the H200 runs use
(docs/decisions/0005)."""

import os
import socket

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from services.verifier.harness.shared_memory import ALIGN, Region, layout, recv_region, region_bytes, send_region

CPU = torch.device("cpu")
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.uint8]
shapes = st.lists(st.integers(0, 7), min_size=0, max_size=3)
inputs = st.lists(st.tuples(st.sampled_from(DTYPES), shapes), min_size=1, max_size=5)


def _tensors(spec) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return [(torch.rand(shape, generator=generator) * 100).to(dtype) for dtype, shape in spec]


@settings(max_examples=60, deadline=None)
@given(inputs)
def test_every_input_lies_aligned_inside_the_region_and_apart_from_the_others(spec):
    tensors = _tensors(spec)
    places = layout(tensors)
    ends = []
    for place, tensor in zip(places, tensors, strict=True):
        assert place["offset"] % ALIGN == 0
        assert all(place["offset"] >= end for end in ends)
        ends.append(place["offset"] + tensor.numel() * tensor.element_size())
    assert region_bytes(places) >= max(ends) and region_bytes(places) % ALIGN == 0


@settings(max_examples=30, deadline=None)
@given(inputs)
def test_what_the_judge_fills_is_what_the_other_mapping_reads(spec):
    """The judge's region and a second mapping of its descriptor, as the candidate opens it after the handover: every
    input reads back equal, with its dtype and shape, and a refill shows through without anything on the reading side
    writing."""
    tensors = _tensors(spec)
    places = layout(tensors)
    judge = Region.create(places, CPU)
    judge_end, candidate_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        send_region(judge_end, judge.fd)
        candidate = Region.open(recv_region(candidate_end), judge.size, places, CPU)
        for refill in (tensors, [t.flip(list(range(t.dim()))) if t.dim() else t for t in tensors]):
            judge.fill(refill)
            for seen, drawn in zip(candidate.tensors, refill, strict=True):
                assert seen.dtype == drawn.dtype and seen.shape == drawn.shape
                assert torch.equal(seen, drawn)
        candidate.close()
    finally:
        judge.close()
        judge_end.close()
        candidate_end.close()


def test_a_region_too_small_for_its_layout_is_refused():
    places = layout([torch.zeros(4096)])
    judge = Region.create(places, CPU)
    try:
        with pytest.raises(ValueError, match="cannot hold"):
            Region.open(os.dup(judge.fd), judge.size, layout([torch.zeros(judge.size)]), CPU)
    finally:
        judge.close()


def test_a_handover_without_a_descriptor_is_refused():
    sender, receiver = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with sender, receiver:
        sender.send(b"R")
        with pytest.raises(ValueError, match="one region's descriptor"):
            recv_region(receiver)


def test_closing_a_region_whose_views_route_code_still_holds_leaves_them_readable():
    """The candidate closes the last problem's regions at the next load, while route code may still hold the old
    tensors: closing must not fail the load, and the views stay valid until they go."""
    tensors = [torch.arange(1000, dtype=torch.float32)]
    region = Region.create(layout(tensors), CPU)
    region.fill(tensors)
    kept = region.tensors[0]
    region.close()
    assert torch.equal(kept, tensors[0])


def test_inputs_that_are_not_tensors_are_refused():
    with pytest.raises(TypeError, match="are tensors"):
        layout([torch.zeros(3), 1.5])
