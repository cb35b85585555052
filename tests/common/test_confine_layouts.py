"""KB_HOME stays hidden from route code whatever the layout (issues 43 and 36 item 6): a checkout under a directory
the sandboxes cover (/root, /tmp, /var/tmp), bound back read-only so the code it holds can run, must not bring back
the KB_HOME inside it. Driven through the real layers: the candidate's confinement (bubblewrap, the job user) and the
check's sandbox (unshare and sandbox_setup.sh)."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from services.common.mounts import Unconfinable, mount_plan
from services.common.sandbox import Sandbox, SandboxConfig, isolation_available
from services.verifier.harness.confine import Caps, Confinement, job_ids, usable_bwrap
from tests.missing import missing_service

COVERED = ("/root", "/tmp", "/var/tmp")
TOKEN = "token-contents-never-seen"
LOG_LINE = "a log line never seen"
ROUTE = "route code that runs"


@pytest.fixture(params=COVERED)
def checkout(request):
    """A small checkout under a covered directory: route code, and KB_HOME (`.state`) as `make up` lays it out with
    a token only its owner reads and a log every user reads."""
    root = Path(tempfile.mkdtemp(prefix="kb-layout-", dir=request.param))
    try:
        root.chmod(0o755)
        (root / "kernels").mkdir(mode=0o755)
        (root / "kernels" / "route.py").write_text(f"# {ROUTE}\n")
        (root / "kernels" / "route.py").chmod(0o644)
        home = root / ".state"
        home.mkdir(mode=0o755)
        (home / "curator.token").write_text(TOKEN)
        (home / "curator.token").chmod(0o600)
        (home / "verifier.log").write_text(LOG_LINE)
        (home / "verifier.log").chmod(0o644)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def probe(checkout: Path) -> str:
    home = checkout / ".state"
    return (
        f'echo "entries: $(ls -A {home} 2>/dev/null | wc -l)";'
        f"cat {home}/curator.token {home}/verifier.log 2>/dev/null; echo;"
        f"cat {checkout}/kernels/route.py"
    )


def assert_hidden(output: str) -> None:
    assert ROUTE in output, f"the checkout was not bound back, so nothing was tried: {output}"
    assert "entries: 0" in output, f"KB_HOME listed from inside: {output}"
    assert TOKEN not in output and LOG_LINE not in output, output


@pytest.mark.skipif(
    os.geteuid() != 0 or job_ids() is None or usable_bwrap()[0] is None,
    reason=missing_service(
        "confinement", "needs root, the job user kb-job and bubblewrap: make up / .ci/run provide them"
    ),
)
def test_the_candidate_never_sees_kb_home_inside_its_bound_back_checkout(checkout):
    confinement = Confinement.prepare(
        Caps(), name="kb-layout-test", hidden=[str(checkout / ".state")], visible=[str(checkout)]
    )
    try:
        done = subprocess.run(
            confinement.command(["sh", "-c", probe(checkout)]),
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin"},
        )
    finally:
        confinement.close()
    assert done.returncode == 0, done.stderr
    assert_hidden(done.stdout)


@pytest.mark.skipif(
    not isolation_available(), reason=missing_service("the check sandbox", "needs unshare: root or user namespaces")
)
async def test_the_check_never_sees_kb_home_inside_its_bound_back_checkout(checkout, tmp_path):
    """The check runs as root with DAC override kept for its harness: only an absent file is out of its reach."""
    config = SandboxConfig(
        root=tmp_path / "boxes", isolate=True, hidden=(str(checkout / ".state"),), visible=(str(checkout),)
    )
    sandbox = Sandbox(config)
    box = sandbox.make_box("layout")
    outcome = await sandbox.run(box, ["sh", "-c", probe(checkout)], {"PATH": "/usr/bin:/bin"}, time_limit_s=30)
    assert outcome.exit_code == 0, outcome.output_tail
    assert_hidden(outcome.output_tail)


@pytest.mark.skipif(
    os.geteuid() != 0 or job_ids() is None or usable_bwrap()[0] is None,
    reason=missing_service(
        "confinement", "needs root, the job user kb-job and bubblewrap: make up / .ci/run provide them"
    ),
)
def test_a_candidate_whose_code_lies_inside_a_hidden_directory_is_refused_naming_it(checkout):
    with pytest.raises(Unconfinable, match=f"{checkout}/kernels is kept visible to run but lies inside {checkout}"):
        Confinement.prepare(Caps(), name="kb-layout-test", hidden=[str(checkout)], visible=[str(checkout / "kernels")])


def test_the_plan_covers_again_every_hidden_directory_inside_what_it_binds_back():
    plan = mount_plan(
        ["/root", "/tmp"],
        hidden=["/root/kb/.state", "/srv/secrets", "/tmp/ci/kb/.state", "/root/.config/kernelboard"],
        visible=["/root/kb", "/root/kb/.venv", "/tmp/ci/kb", "/usr"],
    )
    assert plan.covers == ("/root", "/tmp", "/srv/secrets")
    assert plan.bind_backs == ("/root/kb", "/tmp/ci/kb")
    assert plan.recovers == ("/root/kb/.state", "/tmp/ci/kb/.state")
    assert plan.unconfinable == ()


def test_the_plan_names_what_cannot_be_shown_without_showing_what_is_hidden():
    plan = mount_plan(["/root", "/tmp"], hidden=["/srv/kb"], visible=["/srv/kb/code", "/tmp"])
    assert plan.unconfinable == (
        "/tmp is kept visible to run and is covered too",
        "/srv/kb/code is kept visible to run but lies inside /srv/kb, which must stay hidden",
    )


CONFINED_INSIDE = """
import subprocess, sys
from services.verifier.harness.confine import Caps, Confinement
confinement = Confinement.prepare(Caps(), name="kb-layout-nested", visible=[sys.argv[1]])
try:
    done = subprocess.run(confinement.command(["sh", "-c", sys.argv[2]]), capture_output=True, text=True, timeout=60)
finally:
    confinement.close()
print(done.stdout, done.stderr)
"""


@pytest.mark.skipif(
    not isolation_available() or os.geteuid() != 0 or job_ids() is None or usable_bwrap()[0] is None,
    reason=missing_service(
        "confinement", "needs unshare, root, the job user kb-job and bubblewrap: make up / .ci/run provide them"
    ),
)
async def test_route_code_confined_inside_a_check_never_sees_kb_home(checkout, tmp_path):
    """Both layers stacked as on the service path: the check's harness does not know KB_HOME (the check's environment
    does not name it); its candidate binds the checkout back from the check's view, where KB_HOME is covered."""
    project = str(Path(__file__).resolve().parents[2])
    config = SandboxConfig(
        root=tmp_path / "boxes", isolate=True, hidden=(str(checkout / ".state"),), visible=(str(checkout), project)
    )
    sandbox = Sandbox(config)
    box = sandbox.make_box("nested")
    command = [sys.executable, "-c", CONFINED_INSIDE, str(checkout), probe(checkout)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": project}
    outcome = await sandbox.run(box, command, env, time_limit_s=60)
    assert outcome.exit_code == 0, outcome.output_tail
    assert_hidden(outcome.output_tail)
