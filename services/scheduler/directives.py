"""sbatch directives, pure: what a job script asks for (its #SBATCH lines), resolved against its partition's defaults
and checked against its limits (scienceslack.json ``limits.partitions``); the script's text and interpreter."""

import re
import shlex
from dataclasses import dataclass

from kernelboard.v1 import events_pb2

from contracts import rules


class DirectiveError(ValueError):
    """A #SBATCH directive the scheduler cannot read or that breaks a partition limit; the message names which."""


# ---------------------------------------------------------------------------------------------------------------------
# Partition limits (scienceslack.json `limits.partitions`)


@dataclass(frozen=True)
class PartitionLimits:
    name: str
    max_time_s: int
    default_time_s: int
    cpus: int
    mem_mb: int
    gpus: int
    default: bool = False
    network: bool = False  # whether its jobs reach the network (limits.partitions.<p>.network; off by default)

    @property
    def def_mem_per_cpu_mb(self) -> int:
        return max(1, self.mem_mb // max(self.cpus, 1))


def partition_limits(approved: rules.Rules) -> dict[str, PartitionLimits]:
    """The partitions jobs may use: the rules' partitions but the runners' (checks[].partition, the maintainers' own);
    the first by name is the default, as in the rendered slurm.conf."""
    partitions = approved.partitions
    ordered = sorted(name for name in partitions if name not in approved.runner_partitions)
    return {
        name: PartitionLimits(
            name=name,
            max_time_s=partitions[name].max_time_s,
            default_time_s=partitions[name].default_time_s,
            cpus=partitions[name].cpus,
            mem_mb=partitions[name].mem_mb,
            gpus=partitions[name].gpus,
            default=name == ordered[0],
            network=partitions[name].network,
        )
        for name in ordered
    }


# ---------------------------------------------------------------------------------------------------------------------
# sbatch directives

_TIME_PATTERNS = (
    (re.compile(r"^(\d+)$"), lambda m: int(m[1]) * 60),
    (re.compile(r"^(\d+):(\d+)$"), lambda m: int(m[1]) * 60 + int(m[2])),
    (re.compile(r"^(\d+):(\d+):(\d+)$"), lambda m: int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3])),
    (re.compile(r"^(\d+)-(\d+)$"), lambda m: int(m[1]) * 86400 + int(m[2]) * 3600),
    (re.compile(r"^(\d+)-(\d+):(\d+)$"), lambda m: int(m[1]) * 86400 + int(m[2]) * 3600 + int(m[3]) * 60),
    (
        re.compile(r"^(\d+)-(\d+):(\d+):(\d+)$"),
        lambda m: int(m[1]) * 86400 + int(m[2]) * 3600 + int(m[3]) * 60 + int(m[4]),
    ),
)
_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def parse_slurm_time(text: str) -> int:
    """Seconds from Slurm's time syntax (minutes, m:s, h:m:s, d-h, d-h:m, d-h:m:s)."""
    value = text.strip()
    if value.lower() in {"infinite", "unlimited"}:
        raise DirectiveError(f"--time={text}: an unlimited time is not allowed; give a limit")
    for pattern, seconds in _TIME_PATTERNS:
        if match := pattern.match(value):
            return seconds(match)
    raise DirectiveError(f"--time={text}: not a Slurm time (minutes, MM:SS, HH:MM:SS or D-HH:MM:SS)")


def parse_memory_mb(text: str, option: str) -> int:
    match = re.fullmatch(r"(\d+)([KMGT]?)B?", text.strip(), re.IGNORECASE)
    if not match:
        raise DirectiveError(f"{option}={text}: not a memory size (e.g. 4096, 4G)")
    mb = int(match[1]) * _MEM_UNITS[(match[2] or "M").upper()]
    return int(-(-mb // 1))


def parse_gpu_count(text: str, option: str) -> int:
    """GPUs in --gres (gpu[:type]:N, comma separated) or --gpus ([type:]N)."""
    total = 0
    for item in text.split(","):
        parts = item.strip().split(":")
        if option == "--gres":
            if parts[0] != "gpu":
                raise DirectiveError(f"--gres={text}: the only generic resource is gpu")
            count = parts[-1] if len(parts) > 1 else "1"
        else:
            count = parts[-1]
        if not count.isdigit():
            raise DirectiveError(f"{option}={text}: cannot read the number of GPUs")
        total += int(count)
    return total


# Every long option of sbatch 22.05, so that an abbreviation sbatch would expand (getopt_long takes any unique
# prefix: `--out` is `--output`) is named for what it is. Only the exact spellings of _ALLOWED pass.
SBATCH_LONG_OPTIONS = frozenset(
    """account acctg-freq array batch bb bbf begin chdir cluster-constraint clusters comment constraint container
    contiguous core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency
    distribution error exclude exclusive export export-file extra-node-info get-user-env gid gpu-bind gpu-freq gpus
    gpus-per-node gpus-per-socket gpus-per-task gres gres-flags help hint hold ignore-pbs input job-name
    kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network
    nice no-kill no-requeue nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node
    ntasks-per-socket open-mode output overcommit oversubscribe parsable partition power priority profile propagate
    qos quiet reboot requeue reservation signal sockets-per-node spread-job switches test-only thread-spec threads
    threads-per-core time time-min tmp tres-per-task uid usage use-min-nodes verbose version wait wait-all-nodes
    wckey wrap""".split()
)
# sbatch's short options: those that take a value, and flags.
_SHORT_WITH_VALUE = {
    "-a": "array", "-A": "account", "-b": "begin", "-c": "cpus-per-task", "-C": "constraint", "-d": "dependency",
    "-D": "chdir", "-e": "error", "-F": "nodefile", "-G": "gpus", "-i": "input", "-J": "job-name", "-L": "licenses",
    "-M": "clusters", "-m": "distribution", "-n": "ntasks", "-N": "nodes", "-o": "output", "-p": "partition",
    "-q": "qos", "-S": "core-spec", "-t": "time", "-w": "nodelist", "-x": "exclude",
}  # fmt: skip
_SHORT_FLAGS = {"-H": "hold", "-k": "no-kill", "-O": "overcommit", "-Q": "quiet", "-s": "oversubscribe",
                "-v": "verbose", "-W": "wait", "-h": "help", "-V": "version"}  # fmt: skip

# What a job script may ask for, by canonical name: True takes a value, False is a flag. Everything else is refused.
_ALLOWED = {
    "time": True, "cpus-per-task": True, "ntasks": True, "nodes": True, "mem": True, "mem-per-cpu": True,
    "partition": True, "gres": True, "gpus": True, "gpus-per-node": True, "gpus-per-task": True,
    "job-name": True, "comment": True, "output": True, "error": True, "input": True, "chdir": True,
    "open-mode": True, "signal": True, "quiet": False, "verbose": False, "no-requeue": False,
    "array": True,  # read so that the partition can refuse it by name (no partition allows arrays)
}  # fmt: skip
# What the limit check calls each resource option.
_RESOURCE_KEYS = {
    "time": "time", "cpus-per-task": "cpus_per_task", "ntasks": "ntasks", "nodes": "nodes", "mem": "mem",
    "mem-per-cpu": "mem_per_cpu", "partition": "partition", "gres": "gres", "gpus": "gpus",
    "gpus-per-node": "gpus", "gpus-per-task": "gpus",
}  # fmt: skip
# Options refused for a reason of their own; the rest of sbatch's are refused as "not among the options jobs use".
_REFUSED_BECAUSE = {
    "uid": "jobs run as the cluster's job user; a script may not choose who runs it",
    "gid": "jobs run as the cluster's job user; a script may not choose its group",
    "export": "jobs get a fixed, clean environment; the scheduler's is never passed on",
    "export-file": "jobs get a fixed, clean environment; the scheduler's is never passed on",
    "get-user-env": "jobs get a fixed, clean environment; the scheduler's is never passed on",
    "hold": "holds are the scheduler's (outsiders' jobs are held for a maintainer)",
    "wrap": "the job is the pushed script itself",
}
# Options whose value is a path: it must stay inside the job directory.
PATH_OPTIONS = ("chdir", "output", "error", "input")


def sbatch_directives(script: str) -> list[str]:
    """The arguments of the script's #SBATCH lines; like sbatch, reading stops at the first command."""
    args: list[str] = []
    for number, line in enumerate(script.splitlines(), start=1):
        stripped = line.strip()
        if number == 1 and stripped.startswith("#!"):
            continue
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        if not stripped.startswith("#SBATCH"):
            break
        body = stripped[len("#SBATCH") :].split(" #", 1)[0]
        try:
            args.extend(shlex.split(body))
        except ValueError as err:
            raise DirectiveError(f"line {number}: cannot read the #SBATCH directive: {err}") from None
    return args


def _canonical_long(name: str) -> str:
    """The sbatch option a long spelling means, or DirectiveError naming the spelling when it is an abbreviation
    (which sbatch would expand) or unknown."""
    bare = name[2:]
    if bare in SBATCH_LONG_OPTIONS:
        return bare
    matches = sorted(option for option in SBATCH_LONG_OPTIONS if option.startswith(bare)) if bare else []
    if len(matches) == 1:
        raise DirectiveError(f"#SBATCH {name}: an abbreviation of --{matches[0]}; write options in full")
    if matches:
        raise DirectiveError(
            f"#SBATCH {name}: an ambiguous abbreviation ({', '.join('--' + m for m in matches[:6])}); "
            "write options in full"
        )
    raise DirectiveError(f"#SBATCH {name}: not an sbatch option")


def judged_options(args: list[str]) -> list[tuple[str, str | None]]:
    """The script's directives as (canonical option, value) in order, each one judged: an option a job may not use,
    an abbreviation, an unknown option or a stray word is a DirectiveError that names it and the rule."""
    options: list[tuple[str, str | None]] = []
    index = 0

    def value_after(spelling: str) -> str:
        nonlocal index
        if index + 1 >= len(args):
            raise DirectiveError(f"#SBATCH {spelling}: missing its value")
        index += 1
        return args[index]

    while index < len(args):
        arg = args[index]
        if arg.startswith("--") and len(arg) > 2:
            spelling, has_value, inline = arg.partition("=")
            option = _canonical_long(spelling)
            _check_allowed(option, spelling)
            if _ALLOWED[option]:
                options.append((option, inline if has_value else value_after(spelling)))
            elif has_value:
                raise DirectiveError(f"#SBATCH {arg}: --{option} takes no value")
            else:
                options.append((option, None))
        elif arg.startswith("-") and len(arg) > 1 and not arg.startswith("--"):
            # getopt's clusters: flags may run together (-Qv), and a value may follow its letter (-c2, -o/tmp/x).
            position = 1
            while position < len(arg):
                letter = "-" + arg[position]
                if letter in _SHORT_WITH_VALUE:
                    option = _SHORT_WITH_VALUE[letter]
                    _check_allowed(option, letter)
                    rest = arg[position + 1 :]
                    options.append((option, rest if rest else value_after(letter)))
                    break
                if letter in _SHORT_FLAGS:
                    option = _SHORT_FLAGS[letter]
                    _check_allowed(option, letter)
                    options.append((option, None))
                    position += 1
                    continue
                raise DirectiveError(f"#SBATCH {letter}: not an sbatch option")
        else:
            raise DirectiveError(f"#SBATCH {arg!r}: not an option (a directive holds options only)")
        index += 1
    return options


def _check_allowed(option: str, spelling: str) -> None:
    named = f"#SBATCH {spelling}" if spelling == f"--{option}" else f"#SBATCH {spelling} (--{option})"
    if option in _REFUSED_BECAUSE:
        raise DirectiveError(f"{named}: not allowed: {_REFUSED_BECAUSE[option]}")
    if option not in _ALLOWED:
        allowed = ", ".join(f"--{name}" for name in sorted(_ALLOWED))
        raise DirectiveError(f"{named}: not among the options jobs may use here ({allowed})")


def job_relative_path(option: str, value: str) -> str:
    """A path option's value, checked to stay inside the job directory: relative, without '..' or '~', no
    backslash (Slurm's escape); DirectiveError naming the option and the rule otherwise."""
    parts = value.split("/")
    if (
        not value
        or value.startswith(("/", "~"))
        or ".." in parts
        or "\\" in value
        or any(ord(char) < 32 for char in value)
    ):
        raise DirectiveError(
            f"#SBATCH --{option}={value}: must be a path inside the job directory (relative to the script's "
            "folder, without '..', '~' or '\\')"
        )
    return value


def directive_values(args: list[str]) -> dict[str, str]:
    """The last value given for each resource option the limit check cares about (every option judged first)."""
    values: dict[str, str] = {}
    for option, value in judged_options(args):
        if option in _RESOURCE_KEYS and value is not None:
            values[_RESOURCE_KEYS[option]] = value
        elif option == "array":
            values["array"] = value or ""
    return values


def resolve_resources(script: str, limits: dict[str, PartitionLimits]) -> events_pb2.JobResources:
    """What the job will get: its directives with the partition's defaults where it names none."""
    values = directive_values(sbatch_directives(script))
    partition_name = values.get("partition", next(p.name for p in limits.values() if p.default))
    if "," in partition_name:
        raise DirectiveError(f"--partition={partition_name}: name one partition")
    if partition_name not in limits:
        raise DirectiveError(f"--partition={partition_name}: no such partition (have: {', '.join(sorted(limits))})")
    partition = limits[partition_name]
    if "array" in values:
        raise DirectiveError(
            f"#SBATCH --array={values['array']}: partition {partition.name} allows no job arrays (one job, one "
            f"directory, one result: limits.partitions.{partition.name})"
        )
    nodes = values.get("nodes", "1")
    if nodes not in {"1", "1-1"}:
        raise DirectiveError(f"--nodes={nodes}: the cluster has one node")
    cpus_per_task = _positive_int(values.get("cpus_per_task", "1"), "--cpus-per-task")
    ntasks = _positive_int(values.get("ntasks", "1"), "--ntasks")
    cpus = cpus_per_task * ntasks
    if "mem" in values:
        mem_mb = parse_memory_mb(values["mem"], "--mem")
        if mem_mb == 0:
            raise DirectiveError(
                f"--mem=0 asks for all of a node's memory; partition {partition.name} allows at most "
                f"{partition.mem_mb} MB (limits.partitions.{partition.name}.mem_mb)"
            )
    elif "mem_per_cpu" in values:
        mem_mb = parse_memory_mb(values["mem_per_cpu"], "--mem-per-cpu") * cpus
    else:
        mem_mb = partition.def_mem_per_cpu_mb * cpus
    time_s = parse_slurm_time(values["time"]) if "time" in values else partition.default_time_s
    if time_s <= 0:
        raise DirectiveError(f"--time={values['time']}: must be more than 0")
    gpus = 0
    if "gres" in values:
        gpus += parse_gpu_count(values["gres"], "--gres")
    if "gpus" in values:
        gpus += parse_gpu_count(values["gpus"], "--gpus")
    return events_pb2.JobResources(partition=partition.name, cpus=cpus, mem_mb=mem_mb, time_limit_s=time_s, gpus=gpus)


def _positive_int(text: str, option: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise DirectiveError(f"{option}={text}: must be a whole number of at least 1")
    return int(text)


def limit_violations(resources: events_pb2.JobResources, limits: dict[str, PartitionLimits]) -> list[str]:
    """Each way the request breaks its partition's limits, naming the limit; empty when it fits."""
    partition = limits[resources.partition]
    where = f"limits.partitions.{partition.name}"
    checks = (
        (resources.time_limit_s, partition.max_time_s, "time {} s exceeds", "{} s", "max_time_s"),
        (resources.cpus, partition.cpus, "{} CPUs exceed", "{}", "cpus"),
        (resources.mem_mb, partition.mem_mb, "{} MB of memory exceed", "{} MB", "mem_mb"),
        (resources.gpus, partition.gpus, "{} GPUs exceed", "{}", "gpus"),
    )
    return [
        f"{asked_words.format(asked)} partition {partition.name}'s limit of {limit_words.format(limit)} ({where}.{key})"
        for asked, limit, asked_words, limit_words, key in checks
        if asked > limit
    ]


def check_script(script: str, limits: dict[str, PartitionLimits]) -> events_pb2.JobResources:
    """The resources of a script that fits its partition; DirectiveError naming every broken limit otherwise."""
    resources = resolve_resources(script, limits)
    if problems := limit_violations(resources, limits):
        raise DirectiveError("; ".join(problems))
    return resources


MAX_SCRIPT_BYTES = 1024 * 1024


def script_text(data: bytes) -> str:
    """A job script's text: refused clearly when it is empty, binary, not UTF-8, has CRLF line ends (bash would
    run `cmd\\r`), or has no `#!` line (sbatch's own rule: the interpreter comes from the first line)."""
    if not data.strip():
        raise DirectiveError("the script is empty")
    if len(data) > MAX_SCRIPT_BYTES:
        raise DirectiveError(f"the script is {len(data)} bytes; at most {MAX_SCRIPT_BYTES} are taken")
    if b"\0" in data:
        raise DirectiveError("the script is binary (it holds NUL bytes); a job script is text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DirectiveError(f"the script is not UTF-8 text (byte {err.start})") from None
    if "\r" in text:
        line = text[: text.index("\r")].count("\n") + 1
        raise DirectiveError(f"line {line}: CRLF or CR line ends; save the script with LF line ends (dos2unix)")
    if not text.startswith("#!"):
        raise DirectiveError("the first line must be #! and the interpreter (e.g. #!/bin/bash), as sbatch requires")
    return text


def interpreter(text: str) -> tuple[str, ...]:
    """The command of the script's #! line as the kernel reads it: an absolute path and at most one argument."""
    line = text.split("\n", 1)[0][2:].strip()
    program, _, argument = line.partition(" ")
    argument = argument.strip()
    if not program.startswith("/"):
        raise DirectiveError(f"line 1: #!{line}: the interpreter must be an absolute path (e.g. #!/bin/bash)")
    return (program, argument) if argument else (program,)


@dataclass(frozen=True)
class JobPlan:
    """What a judged script becomes: its resources, the options passed to sbatch (canonical spellings, path
    options apart), its path options relative to the script's folder, and the command that runs it."""

    resources: events_pb2.JobResources
    options: tuple[str, ...]
    paths: dict[str, str]
    interpreter: tuple[str, ...]


def plan_job(text: str, limits: dict[str, PartitionLimits]) -> JobPlan:
    """The plan for a job script's text, every directive judged; DirectiveError naming the option and the rule."""
    resources = check_script(text, limits)
    options: list[str] = []
    paths: dict[str, str] = {}
    for option, value in judged_options(sbatch_directives(text)):
        if option in PATH_OPTIONS:
            paths[option] = job_relative_path(option, value or "")
        elif option in {"partition", "job-name"}:
            continue  # the partition goes from the resources; the job's name is the scheduler's
        elif value is None:
            options.append(f"--{option}")
        else:
            if any(ord(char) < 32 for char in value):
                raise DirectiveError(f"#SBATCH --{option}: control characters in its value")
            options.append(f"--{option}={value}")
    return JobPlan(
        resources=resources,
        options=(f"--partition={resources.partition}", *options),
        paths=paths,
        interpreter=interpreter(text),
    )
