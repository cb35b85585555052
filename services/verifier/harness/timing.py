"""Timing: the reference's, before any route code runs (``time_reference``), and the candidate's, with every check of
the judge's own clock on it (``judge_timing``, the one entry point verify.py calls per problem).

On the GPU (``time_candidate_by_events``) CUDA events recorded where the kernel runs time each call from an idle,
L2-flushed device; the judge's clock over the call bounds what the candidate reports (``check_judges_clock``), the
judge's own draw of the call's inputs and its flush between the candidate's ready and its go bound what the candidate
may do on the device meanwhile (``check_prepare``), and a secret sample of outputs comes back after the call
answered, to be re-checked. On the CPU (``time_candidate_by_the_judges_clock``) the judge's clock is the timer. The
channel's own cost that these allow for is measured before any route code is imported (CandidateProcess.calibrate).
"""

from __future__ import annotations

import math
import secrets
import time
from typing import TYPE_CHECKING

from services.verifier.harness import draws
from services.verifier.harness.compare import output_faults, received
from services.verifier.harness.context import Broken, Context, Reference, draw, run_model, secret_seed
from services.verifier.harness.device import Timing, release_memory
from services.verifier.harness.shared_memory import Region, layout

if TYPE_CHECKING:
    from services.verifier.harness.verify import Judge

FLOOR_MARGIN = 1.15  # read-only streams can beat the copy bandwidth the floors were measured with by a little
SIDE_STREAM_RATIO = 1.3  # wall time over event time beyond this (plus slack) means work the events did not see
SIDE_STREAM_SLACK_MS = 0.05
SPLIT_PARTS = ("record_start", "call", "record_end", "sync")  # GpuKit.time_one's split of a timed call's wall
# The judge's clock over a timed call vs what the candidate reported, beyond the channel's own cost measured before
# route code was imported: over this ratio plus slack, the candidate's timer or its answer was tampered with.
JUDGE_CLOCK_RATIO = 1.5
JUDGE_CLOCK_SLACK_MS = {"gpu": 0.3, "cpu": 15.0}  # the CPU profile runs on shared, loaded CI machines
# A GPU timed call's inputs are drawn by the judge into memory the candidate maps (shared_memory.py), after the
# candidate said it was ready and just before the go, so that they exist nowhere the candidate can read before its
# call's clock runs. Route code can still look for them on the device meanwhile, but the GPU time-slices between the
# two processes' contexts, so any such work stretches the judge's own drawing and L2 flush. Allowed over what the same
# drawing and flush cost with the device to the judge alone (medians): this many ms plus this share of it. On the H200
# the honest route's 12 problems came -0.22 to +0.23 ms over; a kernel spinning on the inputs (p23) 4.8 ms, a host
# thread polling them with small copies (p24) 0.58 ms (docs/decisions/0005).
PREPARE_SLACK_MS = 0.3
PREPARE_SLACK_SHARE = 0.1
TIMING_POOL = 2  # input buffers rotated through the timed runs
RECHECKS = 5  # timed runs whose outputs the judge takes back and re-checks
COPY_BANDWIDTH_BYTES_PER_S = 4.18e12  # H200, BENCHMARK.md


def split_medians(splits: list) -> dict | None:
    """Where the candidate side says a GPU timed call's wall went (GpuKit.time_one's split), each part's median.
    A report for operators, never judged: the candidate sends it, so route code can write anything here."""
    usable = [
        s
        for s in splits
        if isinstance(s, list)
        and len(s) == len(SPLIT_PARTS)
        and all(isinstance(v, (int, float)) and math.isfinite(v) for v in s)
    ]
    if not usable:
        return None
    return {part: round(Timing.median([s[i] for s in usable]), 4) for i, part in enumerate(SPLIT_PARTS)}


# -- the reference, timed before any route code runs -------------------------------------------------------------------
def time_reference(ctx: Context, ref: Reference) -> Timing:
    """The reference timed the way the candidate is: fresh canaried contents into rotating buffers before every call,
    the L2 flushed, one call on an idle device."""
    slots: dict[int, list] = {}

    def refresh(i: int) -> list:
        return draws.into_slot(
            slots, i % TIMING_POOL, ref.problem, ref.problem_id, ctx.shape, ctx.device, secret_seed()
        )

    for i in range(ctx.warmup):
        run_model(ref.model, refresh(i))
    device_ms, wall_ms, fill_ms = [], [], []
    for i in range(ctx.runs):
        began = time.perf_counter()
        inputs = refresh(i)
        ctx.kit.sync()
        fill_ms.append((time.perf_counter() - began) * 1e3)
        ctx.kit.prepare_run()
        event, wall, out = ctx.kit.time_one(lambda inputs=inputs: ref.model(*inputs))
        ref.output_bytes = out.numel() * out.element_size()
        del out
        device_ms.append(event)
        wall_ms.append(wall)
    ref.fill_ms = Timing.median(fill_ms)  # what the judge's own draw into a candidate's slot costs (check_prepare)
    ref.input_places = layout(inputs)
    return Timing(device_ms, wall_ms)


# -- the candidate, timed and bounded by the judge's clock -------------------------------------------------------------
def judge_timing(judge: Judge):
    ctx = judge.ctx
    ref_timing = judge.ref.timing
    cand_timing = time_candidate(judge)
    ref_ms, cand_ms = Timing.median(ref_timing.device_ms), Timing.median(cand_timing.device_ms)
    cand_wall = Timing.median(cand_timing.wall_ms)
    result = judge.result
    result.reference_ms, result.candidate_ms = ref_ms, cand_ms
    result.speedup = ref_ms / cand_ms if cand_ms > 0 else 0.0
    result.details.update(
        reference_wall_ms=Timing.median(ref_timing.wall_ms),
        candidate_wall_ms=cand_wall,
        reference_spread_ms=[min(ref_timing.device_ms), max(ref_timing.device_ms)],
        candidate_spread_ms=[min(cand_timing.device_ms), max(cand_timing.device_ms)],
    )
    if ctx.kit.profile == "gpu":
        if cand_wall - judge.candidate.event_overhead_ms > SIDE_STREAM_RATIO * cand_ms + SIDE_STREAM_SLACK_MS:
            raise Broken(
                f"class 5 (side streams / hidden work): CUDA events saw {cand_ms:.3f} ms but the synchronize-"
                f"bounded wall time was {cand_wall:.3f} ms -- work ran where the timing events do not look (or "
                "the event timer was patched)"
            )
        if ctx.shape == "full":
            floor_ms = judge.problem.H200_MS["floor"]
        else:
            floor_ms = judge.problem.floor_bytes(ctx.shape) / COPY_BANDWIDTH_BYTES_PER_S * 1e3
        result.floor_fraction = floor_ms / cand_ms if cand_ms > 0 else 0.0
        if ctx.shape == "full" and result.floor_fraction > FLOOR_MARGIN:
            result.flagged = True
            raise Broken(
                f"faster than the bandwidth floor: {cand_ms:.3f} ms is {result.floor_fraction:.2f}x faster than "
                f"the {floor_ms:.3f} ms floor (suspect class 7 (L2 reuse) or class 4 (caching))"
            )


def time_candidate(judge: Judge) -> Timing:
    if judge.ctx.kit.profile == "cpu":
        return time_candidate_by_the_judges_clock(judge)
    return time_candidate_by_events(judge)


def time_candidate_by_events(judge: Judge) -> Timing:
    """GPU: CUDA events recorded where the kernel runs time each call from an idle device, the judge's clock over
    the call bounds them, and a secret sample of outputs comes back after the call answered. The inputs of each
    timed call are drawn by the judge into one of two regions of device memory the candidate maps as its slots,
    after the candidate said it was ready and before the L2 flush and the go (check_prepare bounds what the
    candidate may do on the device meanwhile)."""
    # Both sides give back first what their allocators cached of the correctness calls: the regions come from
    # outside those caches, and with them kept a full-shape log_softmax ran an 80 GB card out of memory
    # (docs/decisions/0007).
    judge.ask({"op": "release"})
    release_memory(judge.ctx.device)
    regions = []
    try:
        for slot in range(TIMING_POOL):
            regions.append(share_inputs(judge, slot, judge.ref.input_places))
        return time_calls_by_events(judge, regions)
    finally:
        for region in regions:
            region.close()


def share_inputs(judge: Judge, slot: int, places: list[dict]) -> Region:
    """Memory for one timed slot's inputs, made by the judge and mapped by the candidate as that slot."""
    region = Region.create(places, judge.ctx.device)
    try:
        judge.candidate.hand_over(region)
        judge.ask({"op": "inputs", "slot": slot, "size": region.size, "places": places})
    except BaseException:
        region.close()
        raise
    return region


def time_calls_by_events(judge: Judge, regions: list[Region]) -> Timing:
    ctx = judge.ctx
    warm = [[i % TIMING_POOL, secret_seed()] for i in range(max(ctx.warmup, TIMING_POOL))]
    judge.ask({"op": "warmup", "calls": warm})
    rechecked = set(secrets.SystemRandom().sample(range(ctx.runs), min(RECHECKS, ctx.runs)))
    device_ms, reported_wall, judged_wall, late, splits, prepare_ms = [], [], [], [], [], []
    for i in range(ctx.runs):
        slot, seed = i % TIMING_POOL, secret_seed()

        def fill(slot=slot, seed=seed):  # after the candidate said it is ready, just before the go
            draw(judge.problem, judge.id, ctx, seed, canaries=True, into=regions[slot].tensors)

        judge.ask({"op": "timed", "slot": slot})
        done, t0, t1, prepared = judge.candidate.timed_go(judge.deadline, "timed", fill)
        prepare_ms.append(prepared)
        judge.accept(done)
        event, wall = done.get("device_ms"), done.get("wall_ms")
        if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in (event, wall)):
            raise Broken("class 6 (patching the harness): the candidate reported no usable time for a timed call")
        device_ms.append(float(event))
        reported_wall.append(float(wall))
        judged_wall.append((t1 - t0) * 1e3)
        splits.append(done.get("split_ms"))
        if i not in rechecked:
            judge.candidate.ask({"op": "drop"}, judge.deadline, reply=False)
            continue
        nbytes = judge.ref.output_bytes
        judge.candidate.ask({"op": "keep"}, judge.deadline, reply=False)
        header, payload = judge.candidate.recv(judge.deadline, nbytes, during="keep")
        t2 = time.perf_counter()
        # The output must have existed when the candidate said it was done: what its copy took beyond the copy's
        # own cost (measured before route code was imported) is work done after the reported time.
        copy_ms = 2.0 * nbytes * judge.candidate.copy_ms_per_byte + 2 * judge.candidate.round_trip_ms
        late.append(((t2 - t1) * 1e3 - copy_ms, float(wall)))
        # Drawn again from the call's seed into the judge's own memory: whatever the candidate wrote over the
        # region's inputs, the reference sees what the judge drew.
        expected = run_model(judge.ref.model, draw(judge.problem, judge.id, ctx, seed, canaries=True))
        out, fault = received(header, payload, expected, judge.candidate, judge.result.details)
        fault = fault or output_faults(out, expected, ctx.rules)
        if fault is not None:
            raise Broken(
                f"class 4 (caching/replay): timed run {i}, whose inputs were fresh like every timed run's, does "
                f"not match the reference; {fault}"
            )
    judge.check_facts(judge.ask({"op": "ping", "facts": True})[0])
    trip = judge.candidate.timed_overhead_ms
    judge.result.details["timed_overhead_ms"] = trip
    judge.result.details["candidate_split_ms"] = split_medians(splits)
    check_prepare(judge, prepare_ms)
    check_judges_clock(judge, reported_wall, [j - trip for j in judged_wall], late)
    return Timing(device_ms, reported_wall)


def check_prepare(judge: Judge, prepare_ms: list[float]) -> None:
    """Class 5: the judge's drawing of a timed call's inputs and its L2 flush, between the candidate's "ready"
    and the go, against what the same took with the device to the judge alone (the draw in the reference phase,
    the flush in the calibration, both before any route code). The GPU time-slices between the two processes'
    contexts, so route code working on the device meanwhile -- looking for the inputs before the go, working on
    them -- stretches it."""
    seen, expected = Timing.median(prepare_ms), judge.ref.fill_ms + judge.candidate.prepare_ms
    judge.result.details.update(judge_prepare_ms=round(seen, 4), judge_prepare_alone_ms=round(expected, 4))
    if seen - expected > PREPARE_SLACK_MS + PREPARE_SLACK_SHARE * expected:
        raise Broken(
            f"class 5 (side streams / hidden work): drawing a timed call's inputs and flushing the L2 took the "
            f"judge {seen:.3f} ms (median) between the candidate's ready and its go, {expected:.3f} ms with the "
            "device to itself: the candidate ran work on the device outside its timed call (looking at or "
            "working on the inputs before the go)"
        )


def time_candidate_by_the_judges_clock(judge: Judge) -> Timing:
    """CPU: no CUDA events, and any clock in the candidate's process is route code's to slow down, so the judge's
    clock is the timer. A call is timed from the judge's go until its output exists out of the candidate's reach
    (the kernel's stamp of the output's last message on the stamped channel), less what that costs without a
    call (measured before route code was imported): work deferred past the call's return (a thread, a lazy
    copy) and a slowed candidate-side clock are inside it and gain nothing. The go carries the seed of the
    call's inputs, so that no work on them can be done before the clock runs (p20: route code that computed the
    answer when the inputs were drawn on an earlier order); the candidate draws them inside the clock, and the
    judge takes off what the same draw cost the candidate before route code was imported (the least of several).
    Every output comes back with its call and is re-checked. The candidate's own report only names class 6 where it
    disagrees grossly with the judge's clock."""
    ctx = judge.ctx
    warm = [[i % TIMING_POOL, secret_seed()] for i in range(max(ctx.warmup, TIMING_POOL))]
    judge.ask({"op": "warmup", "calls": warm})
    channel_ms = judge.candidate.stamped_channel_ms(judge.ref.output_bytes)
    draw_ms = judge.candidate.draw_ms[judge.id]
    judged_ms, reported_wall = [], []
    for i in range(ctx.runs):
        seed = secret_seed()
        inputs = draw(judge.problem, judge.id, ctx, seed, canaries=True)
        expected = run_model(judge.ref.model, inputs)
        judge.ask({"op": "timed", "slot": i % TIMING_POOL, "stamped": True})
        nbytes = expected.numel() * expected.element_size()
        done, payload, took = judge.candidate.stamped_call(judge.deadline, nbytes, "timed", seed)
        judge.accept(done)
        if took is None:
            raise Broken("route: a timed call answered without its output")
        if took < 0:
            raise Broken(
                f"class 6 (patching the harness): timed run {i}'s output was handed over before the judge let the "
                "call go"
            )
        wall = done.get("wall_ms")
        if not (isinstance(wall, (int, float)) and math.isfinite(wall) and wall >= 0):
            raise Broken("class 6 (patching the harness): the candidate reported no usable time for a timed call")
        out, fault = received(done, payload, expected, judge.candidate, judge.result.details)
        fault = fault or output_faults(out, expected, ctx.rules)
        if fault is not None:
            raise Broken(
                f"class 4 (caching/replay): timed run {i}, whose inputs were fresh like every timed run's, does "
                f"not match the reference; {fault}"
            )
        judged_ms.append(max(took - channel_ms - draw_ms, 0.0))
        reported_wall.append(float(wall))
    judge.check_facts(judge.ask({"op": "ping", "facts": True})[0])
    judge.result.details.update(
        judge_channel_ms=channel_ms,
        candidate_draw_ms=draw_ms,
        candidate_reported_ms=Timing.median(reported_wall),
    )
    check_judges_clock(judge, reported_wall, judged_ms, [])
    return Timing(judged_ms, judged_ms)


def check_judges_clock(judge: Judge, reported_wall, judged_ms, late):
    """Class 6: what the candidate reports must account for the time the judge saw the call take (``judged_ms``,
    the channel's own cost taken off). Judged on the quietest calls (a quarter of them, the fastest re-check), so
    that a loaded machine's hiccups are not read as tampering, while a patched timer or a lazy output is late on
    every call."""
    slack = JUDGE_CLOCK_SLACK_MS[judge.ctx.kit.profile]
    excess = sorted(j - JUDGE_CLOCK_RATIO * r for j, r in zip(judged_ms, reported_wall, strict=True))
    quiet = excess[len(excess) // 4]
    judge.result.details["judge_wall_ms"] = Timing.median(judged_ms)
    if quiet > slack:
        claimed, seen = Timing.median(reported_wall), Timing.median(judged_ms)
        raise Broken(
            f"class 6 (patching the harness): the candidate's timer reported {claimed:.3f} ms per call (median) "
            f"but the judge's clock saw {seen:.3f} ms -- a patched timer or statistics"
        )
    if late and min(took - JUDGE_CLOCK_RATIO * wall for took, wall in late) > slack:
        took, wall = min(late)
        raise Broken(
            f"class 6 (patching the harness): every re-checked output arrived late, at least {took:.3f} ms after "
            f"its call was reported done (copy allowed for) while the candidate reported {wall:.3f} ms for the "
            "call -- work done after the reported time (a lazy or deferred output)"
        )
