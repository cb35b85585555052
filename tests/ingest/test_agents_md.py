"""AGENTS.md's loop works copy-pasted on a fresh clone (issue 37): its shell block, run as written by an agent
against a real ingest service -- start a route, clone it, write a route file from main's template, verify it locally
(on this CPU, as the service would), commit it with `git add`, push it.

This stack has no verifier, so the block's last line (following the check) is left out here; tests/verifier covers
`kb checks --watch` against a real one."""

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def the_loop() -> list[str]:
    text = (REPO / "AGENTS.md").read_text()
    after = text[text.index("The whole loop, copy-pasted on a fresh clone") :]
    block = re.search(r"```sh\n(.*?)```", after, re.S).group(1)
    return block.strip().splitlines()


async def test_the_loop_in_agents_md_runs_as_written(stack, tmp_path):
    lines = the_loop()
    assert any(line.startswith("git add ") for line in lines) and not any("commit -am" in line for line in lines)
    assert lines[-1].startswith("kb checks ")
    script = "\n".join(lines[:-1])
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_", "TRITON_", "GIT_"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",  # the installed `kb`
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        HOME=str(home),
        KB_INGEST_ADDR=f"127.0.0.1:{stack.port}",
        KB_VERIFIER_ADDR="127.0.0.1:1",
        KB_TOKEN=stack.tokens["alice/agent-1"],
        GIT_AUTHOR_NAME="agent",
        GIT_AUTHOR_EMAIL="agent@example.org",
        GIT_COMMITTER_NAME="agent",
        GIT_COMMITTER_EMAIL="agent@example.org",
    )
    done = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "result  passed, unverified (CPU profile)" in output  # kb verify ran the Triton template on this CPU
    assert "pushed refs/heads/routes/my-first-route" in output
    clone = tmp_path / "kb-my-first-route"
    shown = subprocess.run(["git", "-C", str(clone), "show", "--name-only", "--format=", "HEAD"], capture_output=True)
    assert shown.stdout.decode().split() == ["routes/my-first-route/new_gelu.py"]
    assert subprocess.run(["git", "-C", str(clone), "status", "--porcelain"], capture_output=True).stdout == b""
    assert (home / ".cache" / "kernelboard" / "verify" / "my-first-route.json").is_file()
