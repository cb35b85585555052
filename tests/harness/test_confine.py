"""harness/confine.py on this machine: a confined command runs as the job user, outside any user namespace,
reads no root-only file, reaches no network, writes only its capped /tmp, and is held to its caps."""

import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from services.verifier.harness.confine import Caps, Confinement, job_ids
from tests.missing import missing_service

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or job_ids() is None or shutil.which("bwrap") is None,
    reason=missing_service(
        "confinement", "needs root, the job user kb-job and bubblewrap: make up / .ci/run provide them"
    ),
)


def run_confined(script: str, caps: Caps | None = None, **options) -> subprocess.CompletedProcess:
    confinement = Confinement.prepare(caps or Caps(), name="kb-confine-test", **options)
    try:
        return subprocess.run(
            confinement.command(["sh", "-c", script]),
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin"},
        )
    finally:
        confinement.close()


def test_it_runs_as_the_job_user_with_no_capability_and_no_user_namespace():
    done = run_confined("id -u; id -G; grep CapEff /proc/self/status; readlink /proc/self/ns/user")
    uid, groups, caps, userns = done.stdout.split("\n")[:4]
    assert int(uid) == job_ids()[0] and groups.split() == [str(job_ids()[1])]
    assert caps.split()[1] == "0000000000000000"
    assert userns == os.readlink("/proc/self/ns/user"), "a uid inside a user namespace maps back to root"


def test_root_only_files_hidden_directories_and_the_network_are_out_of_reach(tmp_path):
    secret = Path(f"/var/lib/kb-confine-secret-{secrets.token_hex(4)}")
    secret.write_text("secret")
    secret.chmod(0o600)
    hidden = tmp_path / "judge"
    hidden.mkdir()
    (hidden / "metrics.json").write_text("{}")
    try:
        done = run_confined(
            f"cat {secret} || echo unreadable; ls {hidden}; echo listed;"
            "(echo > /dev/tcp/127.0.0.1/5432) 2>/dev/null && echo reached || echo no-network;"
            "touch /usr/kb-written 2>/dev/null && echo host-writable || echo host-read-only",
            hidden=[str(hidden)],
        )
    finally:
        secret.unlink()
    assert "secret" not in done.stdout and "unreadable" in done.stdout
    assert "metrics.json" not in done.stdout
    assert "host-read-only" in done.stdout and not Path("/usr/kb-written").exists()


def test_its_disk_is_the_capped_scratch_tmpfs_and_its_processes_are_capped():
    done = run_confined(
        "head -c 4000000 /dev/zero > /tmp/fill 2>/dev/null && echo filled || echo disk-full;"
        "for i in $(seq 40); do sleep 5 & done 2>/dev/null; wait; echo forked",
        Caps(disk_bytes=1 << 20, pids=16),
    )
    assert "disk-full" in done.stdout
    assert "forked" not in done.stdout and done.returncode != 0  # the shell could not start its 40 children


def test_no_place_it_can_write_holds_more_than_its_disk_cap():
    """Every mount of its sandbox that the job user can write into, tried with more than the cap: /tmp was capped and
    /dev/shm, a tmpfs too, was not (half the host's memory, and where no cgroup can be made, nothing charges it)."""
    done = run_confined(
        "cut -d' ' -f5 /proc/self/mountinfo | sort -u | while read -r place; do"
        '  f="$place/kb-fill-$$"; head -c 4000000 /dev/zero > "$f" 2>/dev/null && echo "took $place";'
        '  [ -w "$place" ] && echo "writable $place"; rm -f "$f" 2>/dev/null; done; true',
        Caps(disk_bytes=1 << 20),
    )
    assert "writable /tmp" in done.stdout and "writable /dev/shm" in done.stdout, done.stdout
    assert "took" not in done.stdout, done.stdout
