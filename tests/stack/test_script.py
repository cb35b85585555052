"""stack.py must run before the venv exists: on a bare Python without site-packages."""

import subprocess
import sys

from .conftest import LOCAL


def test_stack_py_needs_only_the_standard_library(tmp_path):
    done = subprocess.run(
        [sys.executable, "-S", "-I", str(LOCAL / "stack.py"), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"KB_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode in (0, 3), done.stderr  # 3: a component is stopped, which is the case here
    assert f"KB_HOME {tmp_path}" in done.stdout
    assert "relay      stopped" in done.stdout


def test_a_bad_command_line_is_refused_with_usage(tmp_path):
    done = subprocess.run(
        [sys.executable, str(LOCAL / "stack.py"), "down", "nosuch"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"KB_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1
    assert "no component named nosuch; components: relay, ingest, scheduler, verifier, board, web" in done.stderr


def test_apt_installs_start_no_service_and_an_existing_policy_is_kept(stack, tmp_path, monkeypatch):
    policy = tmp_path / "policy-rc.d"
    monkeypatch.setattr(stack, "POLICY_RC_D", policy)
    with stack.services_not_autostarted():
        # invoke-rc.d runs the policy with the script and action; exit 101 means "action forbidden".
        assert subprocess.run([str(policy), "postgresql", "start"]).returncode == 101
    assert not policy.exists()

    policy.write_text("#!/bin/sh\nexit 0\n")
    with stack.services_not_autostarted():
        assert policy.read_text() == "#!/bin/sh\nexit 0\n"
    assert policy.read_text() == "#!/bin/sh\nexit 0\n"


def test_the_venv_is_reinstalled_only_when_requirements_or_project_change(stack, tmp_path):
    repo = tmp_path / "repo"
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (repo / "requirements.txt").write_text("asyncpg==0.32.0\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\n')
    layout = stack.Layout(repo=repo, home=tmp_path / "state")
    stamp = stack.requirements_stamp(layout)
    (repo / ".venv" / ".kb-requirements").write_text(stamp + "\n")
    ctx = stack.Context(layout=layout, database_url="", nats_url="")
    assert stack.step_venv(ctx) == f"up to date ({repo / '.venv'})"

    (repo / "requirements.txt").write_text("asyncpg==0.32.0\nnats-py==2.16.0\n")
    assert stack.requirements_stamp(layout) != stamp
    (repo / "requirements.txt").write_text("asyncpg==0.32.0\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "y"\n')
    assert stack.requirements_stamp(layout) != stamp


def test_a_logged_step_writes_as_it_goes_and_a_failure_shows_the_tail_and_the_log(stack, tmp_path):
    log = tmp_path / "logs" / "step.log"
    done = stack.run(["sh", "-c", "echo out; echo err >&2"], "a step", 30, log=log)
    assert done.stdout.split() == ["out", "err"]
    assert "out\nerr\n" in log.read_text()
    try:
        stack.run(["sh", "-c", "echo the reason it broke; exit 3"], "another step", 30, log=log)
    except stack.StackError as err:
        message = str(err)
    else:
        raise AssertionError("a failing command passed")
    assert message.startswith("another step failed (exit 3)")
    assert "the reason it broke" in message and f"full log: {log}" in message
    try:
        stack.run(["sleep", "5"], "a slow step", 0.5)
    except stack.StackError as err:
        assert str(err) == "a slow step: still running after 0 s (sleep 5)"
    else:
        raise AssertionError("a step past its deadline passed")
