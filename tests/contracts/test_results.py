"""The one wording of a result (contracts/results.py), state by state, as ARCHITECTURE's "Results" table says it."""

from types import SimpleNamespace

from kernelboard.v1 import board_pb2, events_pb2, verifier_pb2

from contracts import results


def completed(**fields) -> events_pb2.CheckCompleted:
    return events_pb2.CheckCompleted(check_id="c", route="r", sha="s" * 40, **fields)


def test_each_state_of_a_check_has_its_words_and_a_score_only_where_it_counts():
    verified = completed(passed=True, verified=True, score=4.31, score_low=4.27, score_high=4.35, runner="NVIDIA H200")
    assert results.check_verdict(verified) == ("passed", "passed, verified", "4.310 (4.270–4.350)", True)
    cpu = completed(passed=True, verified=False, score=0.55, runner="cpu")
    assert results.check_verdict(cpu) == ("passed", "passed, unverified (CPU profile)", "—", False)
    failed = completed(passed=False, score=0.61, reasons=["matmul: class 9 (library calls): aten::mm"])
    assert results.check_verdict(failed) == ("failed", "failed", "—", False)  # a failed check shows no score
    incomplete = completed(passed=True, verified=False, score=2.0, incomplete=True)
    incomplete.subtasks.add(id="matmul", submitted=True, not_judged="CUDA error in the judge\\nat step 2")
    incomplete.subtasks.add(id="kl_div", submitted=True, not_judged="out of memory")
    assert results.check_verdict(incomplete) == ("incomplete", "incomplete: 2 problems not judged", "—", False)
    assert results.problem_result(incomplete.subtasks[0]) == "not judged: CUDA error in the judge; at step 2"
    # a verified check the board's rules do not accept: its score shown, marked
    assert results.check_verdict(verified, counted=False).score == "4.310 (4.270–4.350) (not counted)"


def test_problems_read_not_submitted_passed_or_failed_and_a_queued_check_its_place():
    eager = events_pb2.Subtask(id="hinge_loss", submitted=False, passed=True, speedup=1.0)
    fast = events_pb2.Subtask(id="matmul", submitted=True, passed=True, speedup=1.5, speedup_low=1.4, speedup_high=1.6)
    assert (results.problem_result(eager), results.speedup(eager)) == ("not submitted (eager)", "—")
    assert (results.problem_result(fast), results.speedup(fast)) == ("passed", "1.500× (1.400×–1.600×)")
    queued = verifier_pb2.Check(state="queued", queue_position=2, estimated_wait_s=240)
    assert results.live_verdict(queued).label == "queued, 2nd in line, starts in about 4 min"
    running = verifier_pb2.Check(state="running", claimed_by="gpu0")
    assert results.live_verdict(running).label == "running on gpu0"
    on_slurm = verifier_pb2.Check(state="running", claimed_by="slurm:vm:12", slurm_job_id="51")
    assert results.live_verdict(on_slurm).label == "submitted to Slurm (job 51), waiting for a runner"
    on_slurm.runner_node = "runner2"
    assert results.live_verdict(on_slurm).label == "running on runner2 (Slurm job 51)"


def test_board_entries_listed_beside_never_show_a_score_that_reads_as_counting():
    ranked = board_pb2.BoardEntry(rank=2, source="verified", score=2.5, runner="NVIDIA H200")
    assert (results.place(ranked), results.entry_verdict(ranked).score) == ("2", "2.500")
    # where the board says two entries share a place (their intervals overlap), read as plain data
    tied = SimpleNamespace(rank=2, tied=True, source="verified", score=2.5, score_low=2.4, score_high=2.6, reason="")
    assert (results.place(tied), results.entry_verdict(tied).score) == ("=2", "2.500 (2.400–2.600)")
    report = board_pb2.BoardEntry(source="reported", score=9.0, reporter="bob")
    assert (results.entry_verdict(report).score, results.entry_reason(report)) == (
        "9.000 (not counted)",
        "reported by bob",
    )
    cpu = board_pb2.BoardEntry(source="unverified check", score=0.5, runner="cpu", reason="CPU profile")
    assert results.entry_line(cpu) == "listed beside: passed, unverified (CPU profile) — not verified: CPU profile"
    failed = board_pb2.BoardEntry(source="failed check", score=0.6, reason="a\\nb")
    assert results.entry_line(failed) == "listed beside: failed — a; b"  # a raw \n in a reason reads as a break


def test_a_job_results_check_is_marked_as_a_jobs_on_every_surface():
    """kb checks and the check page (the verifier's Check, its CheckCompleted), kb board and the web board (a board
    entry), kb board --route and the route page (a history record): each says the check judged job 42's result."""
    result = completed(passed=True, verified=True, score=2.0, kind=events_pb2.COMMIT_KIND_JOB, job_id="42")
    live = verifier_pb2.Check(state="passed", result=result, kind=events_pb2.COMMIT_KIND_JOB, job_id="42")
    queued = verifier_pb2.Check(state="queued", kind=events_pb2.COMMIT_KIND_JOB, job_id="42")
    entry = board_pb2.BoardEntry(rank=1, source=results.VERIFIED, score=2.0, job_id="42")
    beside = board_pb2.BoardEntry(source=results.FAILED_CHECK, job_id="42")
    record = board_pb2.BoardRouteRecord(kind="check", passed=True, verified=True, score=2.0, counted=True, job_id="42")
    labels = [
        results.check_verdict(result).label,
        results.live_verdict(live).label,
        results.entry_verdict(entry).label,
        results.record_verdict(record).label,
    ]
    assert labels == ["passed, verified · job 42's result"] * 4
    assert results.live_verdict(queued).label == "queued · job 42's result"
    assert results.entry_verdict(beside).label == "failed · job 42's result"
    pushed = completed(passed=True, verified=True, score=2.0, kind=events_pb2.COMMIT_KIND_ROUTE)
    assert results.check_verdict(pushed).label == "passed, verified"  # a push's check is not marked
