"""Pid files: what `up` started is found again (so a second `up` starts nothing) and `down` stops only that."""

import os
import socket
import sys
import time

from .conftest import free_port

SLEEPER = "import time; time.sleep(120)  # kb-stack-test-sleeper"
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)  # kb-stack-test-stubborn"
)


def wait_gone(processes, pid, marker, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and processes.process_matches(pid, marker):
        time.sleep(0.05)
    return not processes.process_matches(pid, marker)


def test_a_second_start_finds_the_running_process_and_starts_nothing(processes, layout):
    argv = [sys.executable, "-c", SLEEPER]
    pid, started = processes.start_process(layout, "sleeper", argv, "kb-stack-test-sleeper", dict(os.environ))
    try:
        assert started
        assert processes.read_pid(layout.pid_file("sleeper")) == pid
        again, started_again = processes.start_process(
            layout, "sleeper", argv, "kb-stack-test-sleeper", dict(os.environ)
        )
        assert (again, started_again) == (pid, False)
        assert "starting:" in layout.log_file("sleeper").read_text()
    finally:
        assert processes.stop_process(layout, "sleeper", "kb-stack-test-sleeper") == f"stopped (pid {pid})"
    assert wait_gone(processes, pid, "kb-stack-test-sleeper")
    assert not layout.pid_file("sleeper").exists()
    assert processes.stop_process(layout, "sleeper", "kb-stack-test-sleeper") == "not running"


def test_a_pid_file_of_a_dead_process_is_stale_and_removed(processes, layout):
    layout.run_dir.mkdir(parents=True)
    layout.pid_file("ghost").write_text("999999999\n")  # above any pid_max: no such process
    assert processes.running_pid(layout, "ghost", "anything") is None
    assert not layout.pid_file("ghost").exists()


def test_a_recycled_pid_naming_another_program_is_never_ours(processes, layout):
    # This test's own process is alive but is not a stack component: the marker does not match, so the stack must
    # neither count it as running nor signal it.
    layout.run_dir.mkdir(parents=True)
    layout.pid_file("relay").write_text(f"{os.getpid()}\n")
    assert processes.running_pid(layout, "relay", "services.common.relay") is None
    assert processes.stop_process(layout, "relay", "services.common.relay") == "not running"
    assert not layout.pid_file("relay").exists()


def test_an_exited_child_not_yet_reaped_counts_as_stopped(processes, layout):
    pid, _ = processes.start_process(
        layout, "brief", [sys.executable, "-c", "pass  # kb-brief"], "kb-brief", dict(os.environ)
    )
    # The child exits at once but stays a zombie until reaped: the stack must see it as gone.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and processes.running_pid(layout, "brief", "kb-brief") is not None:
        time.sleep(0.05)
    assert processes.running_pid(layout, "brief", "kb-brief") is None
    assert not layout.pid_file("brief").exists()
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # subprocess reaped it already


def test_stop_escalates_to_sigkill_for_the_whole_group_when_sigterm_is_ignored(processes, layout, tmp_path):
    child_pid_file = tmp_path / "child.pid"
    # The component ignores SIGTERM and has a child of its own: SIGKILL must take both.
    script = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"child = subprocess.Popen(['sleep', '120']); open({str(child_pid_file)!r}, 'w').write(str(child.pid)); "
        "time.sleep(120)  # kb-stack-test-stubborn"
    )
    pid, _ = processes.start_process(
        layout, "stubborn", [sys.executable, "-c", script], "kb-stack-test-stubborn", dict(os.environ)
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not child_pid_file.exists():
        time.sleep(0.05)
    child = int(child_pid_file.read_text())
    outcome = processes.stop_process(layout, "stubborn", "kb-stack-test-stubborn", timeout_s=1.0)
    assert outcome == f"killed (pid {pid} ignored SIGTERM for 1 s)"
    assert not processes.process_matches(pid, "kb-stack-test-stubborn")
    assert wait_gone(processes, child, "sleep")
    assert not layout.pid_file("stubborn").exists()


def test_the_lock_refuses_a_second_up_on_the_same_state(stack, layout):
    with stack.lock(layout):
        try:
            stack.lock(layout)
        except stack.StackError as err:
            assert "stack.lock" in str(err)
        else:
            raise AssertionError("a second lock on the same state directory was granted")
    with stack.lock(layout):
        pass


def test_a_service_port_held_by_someone_else_is_refused_naming_the_holder(components, stack, layout, monkeypatch):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        assert components.port_holder(port).endswith(f"(pid {os.getpid()})")
        monkeypatch.setitem(components.GRPC_PORTS, "board", free_port())
        monkeypatch.setitem(components.METRICS_PORTS, "board", port)
        try:
            components.ensure_ports_free("board", layout)
        except stack.StackError as err:
            assert f"board's metrics port {port} is already taken by" in str(err)
            assert f"(pid {os.getpid()})" in str(err)
        else:
            raise AssertionError("a taken metrics port was not noticed")
    components.ensure_ports_free("board", layout)  # both free again
