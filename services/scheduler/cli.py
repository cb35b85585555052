"""`kb job`: submit a pushed sbatch script, follow, cancel, release and fetch jobs (scheduler :50052)."""

import json
import subprocess
import sys
from pathlib import Path

SLURM_SH = Path(__file__).resolve().parent / "slurm.sh"


def register(subparsers) -> None:
    job = subparsers.add_parser("job", help="compute jobs on the cluster's Slurm (after `kb push`)")
    commands = job.add_subparsers(dest="job_command", metavar="SUBCOMMAND", required=True)

    submit = commands.add_parser("submit", help="run a pushed sbatch script; prints the job id")
    submit.add_argument("script", help="the sbatch script, a path in your clone (as pushed)")
    submit.add_argument("--ref", help="route ref (default: the clone's current branch, routes/<route>)")
    submit.add_argument("--sha", help="commit (default: HEAD); it must be on the route as pushed")
    submit.add_argument("--parsable", action="store_true", help="print only the job id (as sbatch --parsable)")
    submit.set_defaults(handler=submit_job)

    listing = commands.add_parser("list", help="jobs, oldest first")
    listing.add_argument("--route", default="")
    listing.add_argument("--owner", default="")
    listing.add_argument("--live", action="store_true", help="only jobs that have not ended")
    listing.add_argument("--format", choices=("table", "json", "squeue", "sacct"), default="table")
    listing.set_defaults(handler=list_jobs)

    show = commands.add_parser("show", help="one job in full")
    show.add_argument("job_id")
    show.add_argument("--watch", action="store_true", help="follow its changes until its result is committed")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=show_job)

    for name, help_text in (
        ("cancel", "cancel a job (its owner or a maintainer)"),
        ("release", "release a held job (maintainers)"),
    ):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("job_id")
        command.set_defaults(handler=change_job, action=name)

    fetch = commands.add_parser("fetch", help="fetch a job's result commit into this clone as refs/jobs/<id>")
    fetch.add_argument("job_id")
    fetch.set_defaults(handler=fetch_job)

    slurm = commands.add_parser("slurm-sh", help="print slurm.sh: sbatch, squeue, sacct, scancel wired to kb")
    slurm.set_defaults(handler=print_slurm_sh)


def _stub():
    from kernelboard.v1 import scheduler_pb2_grpc

    from services.cli import client

    return scheduler_pb2_grpc.SchedulerStub(client.channel("scheduler"))


def _call(method, request):
    import grpc

    try:
        return method(request, metadata=_stub_metadata(), timeout=60)
    except grpc.RpcError as err:
        print(f"kb job: {err.code().name}: {err.details()}", file=sys.stderr)
        raise SystemExit(1) from None


def _stub_metadata():
    from services.cli import client

    return client.metadata()


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"kb job: git {' '.join(args)}: {done.stderr.strip()}", file=sys.stderr)
        raise SystemExit(1)
    return done.stdout.strip()


def submit_job(args) -> int:
    from kernelboard.v1 import scheduler_pb2

    script = Path(args.script).resolve()
    root = Path(_git("-C", str(script.parent), "rev-parse", "--show-toplevel")).resolve()
    ref = args.ref or _git("-C", str(root), "symbolic-ref", "--short", "HEAD")
    sha = args.sha or _git("-C", str(root), "rev-parse", "HEAD")
    stub = _stub()
    request = scheduler_pb2.SubmitJobRequest(ref=ref, sha=sha, script_path=str(script.relative_to(root)))
    job = _call(stub.SubmitJob, request)
    if args.parsable:
        print(job.job_id)
    else:
        held = " (held: waits for a maintainer to release it)" if job.held else ""
        print(f"Submitted batch job {job.job_id}{held}")
    return 0


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _as_dict(job) -> dict:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(job, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def list_jobs(args) -> int:
    from kernelboard.v1 import scheduler_pb2

    stub = _stub()
    reply = _call(stub.ListJobs, scheduler_pb2.ListJobsRequest(route=args.route, owner=args.owner, live_only=args.live))
    if args.format == "json":
        print(json.dumps([job_dict(job) for job in reply.jobs], indent=2))
    elif args.format == "squeue":
        print(f"{'JOBID':>8} {'PARTITION':>9} {'ROUTE':>12} {'OWNER':>10} {'ST':>10}  REASON")
        for job in reply.jobs:
            where = f"{job.resources.partition:>9} {job.route:>12} {job.owner:>10}"
            print(f"{job.job_id:>8} {where} {job.state:>10}  {job.reason}")
    elif args.format == "sacct":
        print("JobID|State|ExitCode|Elapsed|CPUSeconds")
        for job in reply.jobs:
            exit_code = f"{job.exit_code}:{job.signal}" if job.finished else ""
            print(f"{job.job_id}|{job.state}|{exit_code}|{_elapsed(job.elapsed_s)}|{job.cpu_seconds:.0f}")
    else:
        from services.common.text import table  # every kb table: columns as wide as their widest cell

        rows = [
            [
                job.job_id,
                job.route,
                job.owner,
                job.state,
                job.reason,
                _elapsed(job.elapsed_s),
                job.result_sha[:12] or ("not committed" if job.result_error else ""),
            ]
            for job in reply.jobs
        ]
        headings = ["job", "route", "owner", "state", "reason", "elapsed", "result"]
        print("\n".join(table(headings, rows, numeric={0, 5}, indent="")))
    return 0


def job_dict(job) -> dict:
    """A job as `kb job ... --json` prints it: the Job message, but no exit status or signal before it has ended (a
    pending job has none, not 0)."""
    data = _as_dict(job)
    if not job.finished:
        data["exit_code"] = data["signal"] = None
    return data


def _amount(count: int, unit: str) -> str:
    return f"{count} {unit}{'s' * (count != 1)}"


def resources_text(resources) -> str:
    """partition gpu, 4 CPUs, 8192 MB, 1 GPU, at most 00:30:00."""
    parts = [f"partition {resources.partition}" if resources.partition else "", _amount(resources.cpus, "CPU")]
    parts.append(f"{resources.mem_mb} MB" if resources.mem_mb else "")
    parts.append(_amount(resources.gpus, "GPU") if resources.gpus else "")
    parts.append(f"at most {_elapsed(resources.time_limit_s)}" if resources.time_limit_s else "")
    return ", ".join(p for p in parts if p)


def job_fields(job) -> list[list[str]]:
    """A job's fields in words, as `kb job show` prints them: what is not known yet is left out."""
    state = job.state + (f" ({job.reason})" if job.reason and job.reason != "None" else "")
    if job.held:
        state += ", held: waits for a maintainer's release"
    owner = job.owner + (f" (submitted by {job.submitted_by})" if job.submitted_by not in ("", job.owner) else "")
    fields = [
        ["job", job.job_id],
        ["route", job.route],
        ["script", f"{job.script_path} at {job.sha[:12]}"],
        ["owner", owner],
        ["state", state],
        ["resources", resources_text(job.resources)],
    ]
    if job.released_by:
        fields.append(["released by", job.released_by])
    if job.elapsed_s or job.finished:
        fields.append(["elapsed", f"{_elapsed(job.elapsed_s)} ({job.cpu_seconds:.0f} CPU-seconds)"])
    if job.finished:
        fields.append(["exit code", str(job.exit_code) + (f", signal {job.signal}" if job.signal else "")])
    if job.result_sha:
        fields.append(["result", f"{job.result_sha[:12]} at {job.result_ref} (kb job fetch {job.job_id})"])
    if job.result_error:
        fields.append(["result", f"not committed: {job.result_error}"])
    fields += [["left out", path] for path in job.excluded]
    if job.work_dir:
        fields.append(["directory", job.work_dir])
    return fields


def _print_job(job, as_json: bool) -> None:
    if as_json:
        print(json.dumps(job_dict(job)), flush=True)
        return
    from services.common.text import table

    print("\n".join(table(None, job_fields(job), indent="")) + "\n", flush=True)


def show_job(args) -> int:
    from kernelboard.v1 import scheduler_pb2

    stub = _stub()
    request = scheduler_pb2.GetJobRequest(job_id=args.job_id)
    if not args.watch:
        _print_job(_call(stub.GetJob, request), args.json)
        return 0
    import grpc

    try:
        for job in stub.WatchJob(request, metadata=_stub_metadata()):
            _print_job(job, args.json)
    except grpc.RpcError as err:
        print(f"kb job: {err.code().name}: {err.details()}", file=sys.stderr)
        return 1
    return 0


def change_job(args) -> int:
    from kernelboard.v1 import scheduler_pb2

    stub = _stub()
    if args.action == "cancel":
        job = _call(stub.CancelJob, scheduler_pb2.CancelJobRequest(job_id=args.job_id))
        print(f"job {job.job_id}: cancel requested")
    else:
        job = _call(stub.ReleaseJob, scheduler_pb2.ReleaseJobRequest(job_id=args.job_id))
        print(f"job {job.job_id}: released")
    return 0


def fetch_job(args) -> int:
    """Through ingest's Fetch (the hosted repository serves refs/jobs/<id> like any other ref)."""
    import tempfile

    import grpc
    from kernelboard.v1 import ingest_pb2, ingest_pb2_grpc

    from contracts import names
    from services.cli import client

    ref = names.job_ref(args.job_id)
    root = _git("rev-parse", "--show-toplevel")
    # What this clone has already: the bundle then carries only the result commit and its new files.
    have = _git("-C", root, "for-each-ref", "--format=%(objectname)", "refs/heads", "refs/remotes", "refs/jobs").split()
    try:
        reply = ingest_pb2_grpc.IngestStub(client.channel("ingest")).Fetch(
            ingest_pb2.FetchRequest(refs=[ref], have=sorted(set(have))), metadata=client.metadata(), timeout=120
        )
    except grpc.RpcError as err:
        print(f"kb job: {err.code().name}: {err.details()}", file=sys.stderr)
        return 1
    if not reply.bundle:
        print(f"{ref} -> {_git('-C', root, 'rev-parse', ref)} (already here)")
        return 0
    with tempfile.NamedTemporaryFile(suffix=".bundle") as bundle:
        bundle.write(reply.bundle)
        bundle.flush()
        _git("-C", root, "fetch", "-q", bundle.name, f"+{ref}:{ref}")
    print(f"{ref} -> {_git('-C', root, 'rev-parse', ref)}")
    return 0


def print_slurm_sh(_args) -> int:
    sys.stdout.write(SLURM_SH.read_text())
    return 0
