"""The scheduler's pure domain: directives and limits, sacct/squeue parsing, the job state machine, backoff."""

import shlex
from pathlib import Path

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given
from hypothesis import strategies as st
from kernelboard.v1 import events_pb2

from contracts import rules
from services.common import slurm
from services.scheduler import directives, domain
from services.scheduler.directives import DirectiveError

RULES = rules.load_file(Path(__file__).resolve().parents[2] / "scienceslack.json")
LIMITS = directives.partition_limits(RULES)


def script(*directives: str, body: str = "echo hi\n") -> str:
    return "#!/bin/bash\n" + "".join(f"#SBATCH {d}\n" for d in directives) + body


def test_limits_come_from_the_rules():
    main = LIMITS["main"]
    assert (main.max_time_s, main.default_time_s, main.cpus, main.mem_mb, main.gpus) == (3600, 600, 4, 8192, 0)
    assert main.default and main.def_mem_per_cpu_mb == 2048


def test_defaults_apply_when_the_script_names_nothing():
    resources = directives.check_script(script(), LIMITS)
    assert (resources.partition, resources.cpus, resources.mem_mb, resources.time_limit_s, resources.gpus) == (
        "main",
        1,
        2048,
        600,
        0,
    )


def test_directives_in_every_spelling():
    resources = directives.check_script(script("-t 5", "-c2", "--mem=3G", "--partition=main"), LIMITS)
    assert (resources.time_limit_s, resources.cpus, resources.mem_mb) == (300, 2, 3072)
    resources = directives.check_script(
        script("--time=0:30:00", "--ntasks=2", "--cpus-per-task 2", "--mem-per-cpu=1000"), LIMITS
    )
    assert (resources.time_limit_s, resources.cpus, resources.mem_mb) == (1800, 4, 4000)


def test_reading_stops_at_the_first_command():
    text = "#!/bin/bash\n#SBATCH --time=5\n# a comment\n\necho start\n#SBATCH --time=999\n"
    assert directives.check_script(text, LIMITS).time_limit_s == 300


@pytest.mark.parametrize(
    "directive, named",
    [
        ("--time=61", "limits.partitions.main.max_time_s"),
        ("--time=2:00:00", "limits.partitions.main.max_time_s"),
        ("--cpus-per-task=5", "limits.partitions.main.cpus"),
        ("--mem=9000", "limits.partitions.main.mem_mb"),
        ("--mem=9G", "limits.partitions.main.mem_mb"),
        ("--gres=gpu:1", "limits.partitions.main.gpus"),
        ("--gpus=h200:2", "limits.partitions.main.gpus"),
        ("--mem=0", "limits.partitions.main.mem_mb"),
    ],
)
def test_over_limit_requests_name_the_limit(directive, named):
    with pytest.raises(DirectiveError, match=named.replace(".", r"\.")):
        directives.check_script(script(directive), LIMITS)


@pytest.mark.parametrize(
    "directive, message",
    [
        ("--partition=gpu", "no such partition"),
        ("--partition=runners", "no such partition"),  # the maintainers' runners: checks only
        ("--time=soon", "not a Slurm time"),
        ("--time=UNLIMITED", "unlimited"),
        ("--mem=lots", "not a memory size"),
        ("--nodes=2", "one node"),
        ("-c 0", "at least 1"),
        ("--gres=fpga:1", "generic resource"),
    ],
)
def test_unreadable_directives_are_refused_clearly(directive, message):
    with pytest.raises(DirectiveError, match=message):
        directives.check_script(script(directive), LIMITS)


def test_every_broken_limit_is_named_at_once():
    with pytest.raises(DirectiveError) as err:
        directives.check_script(script("--time=90", "-c 8", "--mem=16G"), LIMITS)
    assert "max_time_s" in str(err.value) and ".cpus" in str(err.value) and "mem_mb" in str(err.value)


@given(st.integers(min_value=0, max_value=9), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_slurm_time_syntax(days, hours, minutes, seconds):
    total = days * 86400 + hours * 3600 + minutes * 60 + seconds
    assert directives.parse_slurm_time(f"{days}-{hours}:{minutes:02d}:{seconds:02d}") == total
    assert directives.parse_slurm_time(f"{days * 24 + hours}:{minutes}:{seconds}") == total
    assert directives.parse_slurm_time(str(minutes)) == minutes * 60
    assert directives.parse_slurm_time(f"{minutes}:{seconds}") == minutes * 60 + seconds
    assert directives.parse_slurm_time(f"{days}-{hours}") == days * 86400 + hours * 3600


def test_route_refs():
    assert domain.route_of_ref("refs/heads/routes/fast") == "fast"
    assert domain.route_of_ref("routes/fast-2") == "fast-2"
    for bad in ("refs/heads/main", "refs/jobs/3", "refs/heads/routes/", "refs/heads/routes/a/b"):
        with pytest.raises(ValueError, match="not a route ref"):
            domain.route_of_ref(bad)


def test_sacct_lines():
    text = (
        "12|COMPLETED|0:0|3|6|jobs|billing=2,cpu=2,mem=100M,node=1|kb-a\n"
        "13|CANCELLED by 0|0:15|70|140|runner2|cpu=2,gres/gpu=1,mem=1G,node=1|kb-check-x|y\n"
        "14|FAILED|7:0|0|0|jobs||b\n15|RUNNING|0:0|5|5|jobs||c\n16|PENDING|0:0|0|0|None assigned||d\n\n"
    )
    records = slurm.parse_sacct(text)
    assert records["12"] == slurm.SacctRecord("12", "COMPLETED", 0, 0, 3.0, 6.0, "jobs", 0, "kb-a")
    assert (records["13"].state, records["13"].signal, records["13"].gpus) == ("CANCELLED", 15, 1)
    assert (records["13"].node, records["13"].name) == ("runner2", "kb-check-x|y")
    assert records["14"].exit_code == 7
    assert records["15"].state == "RUNNING"
    assert records["16"].node == ""
    with pytest.raises(ValueError, match="expected 8"):
        slurm.parse_sacct("12|COMPLETED\n")


def test_sinfo_lines():
    nodes = slurm.parse_sinfo(
        "runner1|idle|(null)\nrunner2|down*|gpu:4\nrunner3|allocated|gpu:h200:8(S:0-1),shard:2\n"
        "runner3|allocated|gpu:h200:8(S:0-1),shard:2\nrunner4|drained|(null)\n"
    )
    assert [(n.name, n.up) for n in nodes] == [
        ("runner1", True),
        ("runner2", False),
        ("runner3", True),
        ("runner4", False),
    ]
    assert [n.gpus for n in nodes] == [0, 4, 8, 0]
    with pytest.raises(ValueError, match="expected 3"):
        slurm.parse_sinfo("runner1|idle\n")


def test_squeue_lines():
    records = slurm.parse_squeue("20|PENDING|JobHeldAdmin|kb-a|b\n21|RUNNING|None|kb-x-1\n")
    assert records["20"].reason == "JobHeldAdmin" and records["21"].reason == ""
    assert records["20"].name == "kb-a|b" and records["21"].name == "kb-x-1"
    with pytest.raises(ValueError, match="expected 4"):
        slurm.parse_squeue("20|PENDING\n")


def envelope(version: int, **payload) -> events_pb2.Event:
    event = events_pb2.Event(stream="job:1", stream_version=version, occurred_at=Timestamp(seconds=1000))
    ((name, message),) = payload.items()
    getattr(event, name).CopyFrom(message)
    return event


def submitted_view(held: bool = False) -> domain.JobView:
    events = [
        envelope(1, job_submitted=events_pb2.JobSubmitted(job_id="1", route="r", owner="alice", held=held)),
    ]
    if held:
        events.append(envelope(2, job_held=events_pb2.JobHeld(job_id="1", reason="JobHeldAdmin")))
    return domain.fold_stream("1", events)


def test_fold_follows_the_stream():
    view = submitted_view(held=True)
    assert (view.version, view.held, view.reason, view.submitted_at) == (2, True, "JobHeldAdmin", 1000)
    view = domain.fold(view, envelope(3, job_released=events_pb2.JobReleased(job_id="1", released_by="curator")))
    assert not view.held and view.released_by == "curator"
    view = domain.fold(
        view, envelope(4, job_finished=events_pb2.JobFinished(job_id="1", state="TIMEOUT", elapsed_s=72))
    )
    assert view.finished and view.needs_result and view.state == "TIMEOUT"
    view = domain.fold(view, envelope(5, job_result_committed=events_pb2.JobResultCommitted(job_id="1", sha="abc")))
    assert not view.needs_result and view.version == 5


@pytest.mark.parametrize("state", sorted(domain.FINISHED_STATES))
def test_every_end_state_finishes_the_job(state):
    record = slurm.SacctRecord("1", state, 1, 9, 10.0, 20.0)
    finished = domain.observe(submitted_view(), record, None)
    assert isinstance(finished, events_pb2.JobFinished)
    assert (finished.state, finished.exit_code, finished.signal, finished.cpu_seconds) == (state, 1, 9, 20.0)


def test_an_unknown_job_is_never_done():
    assert domain.observe(submitted_view(), None, None) is None
    # squeue may drop a finished job before accounting has it: wait for sacct rather than guess.
    assert domain.observe(submitted_view(), None, slurm.QueueRecord("1", "COMPLETED", "")) is None


def test_state_changes_are_reported_once():
    view = submitted_view(held=True)
    queue = slurm.QueueRecord("1", "PENDING", "JobHeldAdmin")
    assert domain.observe(view, slurm.SacctRecord("1", "PENDING", 0, 0, 0, 0), queue) is None
    running = domain.observe(view, slurm.SacctRecord("1", "RUNNING", 0, 0, 1, 1), slurm.QueueRecord("1", "RUNNING", ""))
    assert (running.state, running.reason) == ("RUNNING", "")
    view = domain.fold(view, envelope(3, job_state_changed=running))
    assert domain.observe(view, slurm.SacctRecord("1", "RUNNING", 0, 0, 2, 2), None) is None


def test_a_finished_job_takes_no_more_events():
    view = domain.fold(
        submitted_view(), envelope(2, job_finished=events_pb2.JobFinished(job_id="1", state="COMPLETED"))
    )
    assert domain.observe(view, slurm.SacctRecord("1", "COMPLETED", 0, 0, 1, 1), None) is None


def test_backoff_doubles_to_a_cap():
    assert [domain.poll_delay(n) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]


def test_slurm_refusals_are_told_from_an_unreachable_cluster():
    from services.common.slurm import is_refusal

    assert is_refusal("sbatch: error: Batch job submission failed: More processors requested than permitted")
    assert is_refusal("scontrol: error: Access/permission denied for job 12")
    assert not is_refusal(
        "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"
    )
    assert not is_refusal("sacct: error: Problem talking to the database: Unable to connect to database")


# --- options judged before sbatch (issue 14) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "directive, words",
    [
        ("--uid=0", "#SBATCH --uid: not allowed: jobs run as the cluster's job user"),
        ("--gid=0", "#SBATCH --gid: not allowed"),
        ("--export=ALL,KB_HOME", "#SBATCH --export: not allowed: jobs get a fixed, clean environment"),
        ("--export-file=/etc/environment", "#SBATCH --export-file: not allowed"),
        ("--hold", "#SBATCH --hold: not allowed: holds are the scheduler's"),
        ("-H", "#SBATCH -H (--hold): not allowed"),
        ("--output=/tmp/x", "#SBATCH --output=/tmp/x: must be a path inside the job directory"),
        ("-o/tmp/x", "#SBATCH --output=/tmp/x: must be a path inside the job directory"),
        ("--error=../x", "#SBATCH --error=../x: must be a path inside the job directory"),
        ("--input=~/.ssh/id_rsa", "#SBATCH --input=~/.ssh/id_rsa: must be a path inside the job directory"),
        ("-D /", "#SBATCH --chdir=/: must be a path inside the job directory"),
        ("--array=1-3", "#SBATCH --array=1-3: partition main allows no job arrays"),
        ("-a0", "#SBATCH --array=0: partition main allows no job arrays"),
        ("--outp=x", "#SBATCH --outp: an abbreviation of --output; write options in full"),
        ("--ti=5", "#SBATCH --ti: an ambiguous abbreviation (--time, --time-min)"),
        ("--mem-per=1", "#SBATCH --mem-per: an ambiguous abbreviation"),
        ("--exclusive", "#SBATCH --exclusive: not among the options jobs may use here"),
        ("--nice=-19", "#SBATCH --nice: not among the options"),
        ("--wrap=id", "#SBATCH --wrap: not allowed"),
        ("--frobnicate", "#SBATCH --frobnicate: not an sbatch option"),
        ("-Z", "#SBATCH -Z: not an sbatch option"),
        ("stray", "#SBATCH 'stray': not an option"),
        ("--no-requeue=1", "--no-requeue takes no value"),
    ],
)
def test_options_a_job_may_not_use_are_named_with_their_rule(directive, words):
    with pytest.raises(DirectiveError) as err:
        directives.plan_job(script(directive), LIMITS)
    assert words in str(err.value), str(err.value)


def test_a_plan_passes_on_canonical_options_and_keeps_paths_apart():
    plan = directives.plan_job(
        "#!/usr/bin/env python3\n#SBATCH -t 5 -c2 -Q --output=logs/%j.out\n"
        "#SBATCH --chdir=sub --no-requeue\nprint(1)\n",
        LIMITS,
    )
    assert plan.options == ("--partition=main", "--time=5", "--cpus-per-task=2", "--quiet", "--no-requeue")
    assert plan.paths == {"output": "logs/%j.out", "chdir": "sub"}
    assert plan.interpreter == ("/usr/bin/env", "python3")


@given(st.sampled_from(sorted(directives.SBATCH_LONG_OPTIONS)), st.integers(min_value=1, max_value=30))
def test_no_abbreviation_of_any_sbatch_option_passes(option, length):
    spelling = option[: min(length, len(option) - 1)] if len(option) > 1 else option
    if spelling == option or spelling in directives.SBATCH_LONG_OPTIONS:
        return  # an exact spelling of some option: judged as that option
    with pytest.raises(DirectiveError, match="abbreviation"):
        directives.plan_job(script(f"--{spelling}=1"), LIMITS)


@given(st.text(min_size=1, max_size=40))
def test_a_path_option_never_leaves_the_job_directory(value):
    try:
        plan = directives.plan_job(script(f"--output={shlex.quote(value)}"), LIMITS)
    except DirectiveError:
        return
    path = plan.paths.get("output", "")
    assert not path.startswith(("/", "~")) and ".." not in path.split("/") and "\\" not in path


@pytest.mark.parametrize(
    "content, words",
    [
        (b"", "empty"),
        (b"\n\n", "empty"),
        (b"#!/bin/bash\r\necho hi\r\n", "line 1: CRLF"),
        (b"#!/bin/bash\necho hi\r\n", "line 2: CRLF"),
        (b"\x7fELF\x02\x01\x01\x00", "binary"),
        (b"#!/bin/bash\n\xff\xfe\n", "not UTF-8"),
        (b"echo hi\n", "the first line must be #!"),
        (b"#!bash\necho\n", "absolute path"),
    ],
)
def test_scripts_that_are_not_runnable_text_are_refused_clearly(content, words):
    with pytest.raises(DirectiveError, match=words):
        directives.interpreter(directives.script_text(content))


@pytest.mark.parametrize(
    "message, code",
    [
        ("sbatch: error: Batch job submission failed: More processors requested than permitted", "INVALID_ARGUMENT"),
        (
            "sbatch: error: Batch job submission failed: Requested node configuration is not available",
            "INVALID_ARGUMENT",
        ),
        ("sbatch: error: Batch job submission failed: Invalid job array specification", "INVALID_ARGUMENT"),
        ("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy", "RESOURCE_EXHAUSTED"),
        ("sbatch: error: Batch job submission failed: Partition in DOWN state", "FAILED_PRECONDITION"),
        (
            "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
            "FAILED_PRECONDITION",
        ),
        (
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
            "UNAVAILABLE",
        ),
        ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation", "UNAVAILABLE"),
        ("sacct: error: Problem talking to the database: Unable to connect to database", "UNAVAILABLE"),
    ],
)
def test_slurm_messages_map_to_clear_codes(message, code):
    from services.common.slurm import refusal_code

    assert refusal_code(message) == code
