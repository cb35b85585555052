"""Render slurm.conf and slurmdbd.conf for the local cluster from scienceslack.json's `limits` and `checks`.

Standard library only: up.sh runs it with the system python before any virtualenv exists. It reads the rules through
contracts.rules (stdlib only too), the project's one reader of scienceslack.json.

The rules name partition limits the cluster enforces at submission (EnforcePartLimits=ALL): time (MaxTime), memory
(MaxMemPerNode) and CPUs (MaxCPUsPerNode). GPUs: a partition with `gpus: 0` gets no GRES at all, so sbatch refuses
any --gres=gpu request. The node itself is declared with the CPUs and memory this machine really has; where the rules
allow more (4 CPUs on a 2-CPU node), a request between the two passes the partition limit and is refused by sbatch
because no node can hold it. The scheduler checks the rules' limits itself before sbatch and names the limit.

The partitions checks run on (`checks[].partition`) are the maintainers' runners: their own nodes (`runner1`..N, one
slurmd each on this host, `slurmd -N`, distinct ports), `AllowAccounts` the verifier's account alone
(contracts.runners), never the default. Each runner node is declared with this machine's CPUs and memory: a check
takes a whole runner (the verifier asks for --exclusive on a CPU runner). On a machine without GPUs the runners run
the CPU profile and carry no GRES, whatever the rules' `gpus` (the rules describe the benchmark's runners). On a
machine with GPUs (`--gpus N`, up.sh counts them with nvidia-smi) there is one runner, `runner1`, with `Gres=gpu:N`
and a gres.conf naming /dev/nvidia0..N-1: a check asks for its GPU (`checks[].gres`), Slurm hands it one, and
several runner nodes on one host would hand out the same GPUs twice.
"""

import argparse
import math
import os
import sys
from pathlib import Path
from string import Template

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the project root, for contracts/ (run as a script, before any venv)

from contracts import rules as rules_file  # noqa: E402
from contracts import runners  # noqa: E402

JOBS_NODE = "jobs"  # not "localhost": beside other nodes, 22.05 refused a node of that name ("Duplicated NodeHostName")
RUNNER_PREFIX = "runner"


def slurm_minutes(seconds: int) -> str:
    """Slurm time syntax: whole minutes as a number, otherwise minutes:seconds."""
    if seconds % 60 == 0:
        return str(seconds // 60)
    return f"{seconds // 60}:{seconds % 60:02d}"


def runner_names(count: int) -> list[str]:
    return [f"{RUNNER_PREFIX}{index}" for index in range(1, count + 1)]


def partition_lines(rules: rules_file.Rules, node_cpus: int, node_mem_mb: int, runner_count: int) -> list[str]:
    lines = []
    jobs_partitions = sorted(name for name in rules.partitions if name not in rules.runner_partitions)
    runner_nodes = f"{RUNNER_PREFIX}[1-{runner_count}]" if runner_count > 1 else f"{RUNNER_PREFIX}1"
    for name, limits in sorted(rules.partitions.items()):
        cpus, mem_mb = limits.cpus, limits.mem_mb
        # A job without --mem gets DefMemPerCPU per CPU; without it a job takes the whole node and jobs run one by one.
        def_mem_per_cpu = max(1, min(mem_mb // max(cpus, 1), node_mem_mb // max(node_cpus, 1)))
        runners_partition = name in rules.runner_partitions
        fields = [
            f"PartitionName={name}",
            f"Nodes={runner_nodes if runners_partition else JOBS_NODE}",
            f"Default={'YES' if jobs_partitions and name == jobs_partitions[0] else 'NO'}",
            f"MaxTime={slurm_minutes(limits.max_time_s)}",
            f"DefaultTime={slurm_minutes(limits.default_time_s)}",
            f"MaxCPUsPerNode={cpus}",
            f"MaxMemPerNode={mem_mb}",
            f"DefMemPerCPU={def_mem_per_cpu}",
        ]
        if runners_partition:
            fields.append(f"AllowAccounts={runners.RUNNERS_ACCOUNT}")
        fields.append("State=UP")
        lines.append(" ".join(fields))
    return lines


def gres_conf(gpus: int) -> str:
    """gres.conf of a GPU runner: its device files (slurmd gives a job CUDA_VISIBLE_DEVICES from them)."""
    files = "/dev/nvidia0" if gpus == 1 else f"/dev/nvidia[0-{gpus - 1}]"
    header = "# Rendered by deploy/local/slurm/render.py: the GPUs of the runner node.\n"
    return f"{header}NodeName={RUNNER_PREFIX}1 Name=gpu File={files}\n"


def node_lines(rules: rules_file.Rules, values: dict) -> list[str]:
    """The jobs' node, then the runner nodes (only when the rules name a runners' partition), each on its own port."""
    size = f"CPUs={values['node_cpus']} RealMemory={values['node_mem_mb']} State=UNKNOWN"
    lines = [f"NodeName={JOBS_NODE} NodeAddr=127.0.0.1 Port={values['slurmd_port']} {size}"]
    if rules.runner_partitions and int(values["gpus"]) > 0:
        port = int(values["runner_port_base"])
        lines.append(f"NodeName={RUNNER_PREFIX}1 NodeAddr=127.0.0.2 Port={port} Gres=gpu:{values['gpus']} {size}")
    elif rules.runner_partitions:
        # One line for all runners: each its own address (this Slurm build allows one slurmd per address, and all of
        # 127/8 is this host) and port. Separate lines for them made this 22.05 build refuse the config
        # ("Duplicated NodeHostName").
        count, port = int(values["runner_count"]), int(values["runner_port_base"])
        names, addresses, ports = f"{RUNNER_PREFIX}1", "127.0.0.2", str(port)
        if count > 1:
            names = f"{RUNNER_PREFIX}[1-{count}]"
            addresses, ports = f"127.0.0.[2-{count + 1}]", f"{port}-{port + count - 1}"
        lines.append(f"NodeName={names} NodeAddr={addresses} Port={ports} {size}")
    return lines


def render(rules: rules_file.Rules, values: dict) -> tuple[str, str]:
    if any(limits.gpus > 0 for name, limits in rules.partitions.items() if name not in rules.runner_partitions):
        raise ValueError("limits.partitions: GPUs are not available on the local cluster (gpus must be 0)")
    values = dict(values)
    values.setdefault("runner_count", 3)
    values.setdefault("runner_port_base", int(values["ctld_port"]) + 10)
    values.setdefault("gpus", 0)
    gpu_runner = bool(rules.runner_partitions) and int(values["gpus"]) > 0
    if gpu_runner:
        values["runner_count"] = 1
    # A GPU runner: Slurm schedules its GPUs (GresTypes) and accounts them (AllocTRES gres/gpu: a check's cost).
    values["gres_lines"] = "GresTypes=gpu\nAccountingStorageTRES=gres/gpu\n" if gpu_runner else ""
    node_cpus, node_mem_mb = int(values["node_cpus"]), int(values["node_mem_mb"])
    values["nodes"] = "\n".join(node_lines(rules, values))
    values["partitions"] = "\n".join(partition_lines(rules, node_cpus, node_mem_mb, int(values["runner_count"])))
    slurm_conf = Template((HERE / "slurm.conf.in").read_text()).substitute(values)
    slurmdbd_conf = Template((HERE / "slurmdbd.conf.in").read_text()).substitute(values)
    return slurm_conf, slurmdbd_conf


def node_memory_mb() -> int:
    """What slurmd will find, less a margin for the services beside it (slurmd refuses a node declared larger)."""
    with open("/proc/meminfo") as meminfo:
        total_kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:"))
    return int(math.floor(total_kb / 1024 * 0.9))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", required=True, help="scienceslack.json")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--out-dir", required=True, help="where slurm.conf and slurmdbd.conf go")
    parser.add_argument("--db-host", default="127.0.0.1")
    parser.add_argument("--db-port", default="3306")
    parser.add_argument("--db-user", default="kb_slurm")
    parser.add_argument("--db-password-file", required=True)
    parser.add_argument("--db-name", default="kb_slurm_acct")
    parser.add_argument(
        "--port-base", type=int, default=6817, help="slurmctld; slurmd +1, slurmdbd +2, runner nodes +10 on"
    )
    parser.add_argument("--runners", type=int, default=3, help="runner nodes of the runners' partition")
    parser.add_argument("--gpus", type=int, default=0, help="GPUs of this machine: one runner node holds them all")
    args = parser.parse_args(argv)

    if args.runners < 1:
        print("render.py: --runners must be at least 1", file=sys.stderr)
        return 1
    try:
        rules = rules_file.load_file(args.rules)
        slurm_conf, slurmdbd_conf = render(
            rules,
            {
                "state_dir": args.state_dir,
                "node_cpus": os.cpu_count() or 1,
                "node_mem_mb": node_memory_mb(),
                "db_host": args.db_host,
                "db_port": args.db_port,
                "db_user": args.db_user,
                "db_password": Path(args.db_password_file).read_text().strip(),
                "db_name": args.db_name,
                "ctld_port": args.port_base,
                "slurmd_port": args.port_base + 1,
                "dbd_port": args.port_base + 2,
                "runner_count": args.runners,
                "gpus": args.gpus,
                "runner_port_base": args.port_base + 10,
            },
        )
    except (OSError, ValueError, KeyError) as err:
        print(f"render.py: cannot render the Slurm config from {args.rules}: {err!r}", file=sys.stderr)
        return 1
    out = Path(args.out_dir)
    (out / "slurm.conf").write_text(slurm_conf)
    if args.gpus > 0 and rules.runner_partitions:
        (out / "gres.conf").write_text(gres_conf(args.gpus))
    dbd = out / "slurmdbd.conf"
    dbd.touch(mode=0o600, exist_ok=True)
    dbd.chmod(0o600)  # slurmdbd refuses a config others can read: it holds the database password
    dbd.write_text(slurmdbd_conf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
