"""Push -> check -> result as one thread (issue 37): `kb push` against a real ingest service prints the check the
verifier queued for the pushed commit and how to follow it (also in --json); `kb push --wait` follows it to the end
and exits with its verdict, worded as everywhere else (contracts/results.py)."""

import asyncio
import json
import os
import shutil
import subprocess
import sys

from services.common.grpcserver import start_server
from services.ingest.api import add_to_server as add_ingest
from services.ingest.api import server_options
from services.ingest.app import Ingest
from services.ingest.gitrepo import HostedRepo
from services.ingest.seed import EARLIER_RULES, seed
from tests.verifier.conftest import REPO, metrics_script, rules_with_checks

BROKEN = (
    'if [ -e "$1/broken.txt" ]; then printf %s \'{"score": 0, "cost": 0, "passed": false, "runner": "cpu", '
    '"reasons": ["new_gelu: class 9 (library calls): candidate calls torch ops the reference does not"], '
    '"subtasks": []}\' > "$2"; exit 1; fi\n'
)


def project(tmp_path):
    """A benchmark whose one check is quick: it fails a route holding broken.txt and passes any other."""
    root = tmp_path / "project"
    (root / "checks").mkdir(parents=True)
    quick = {"name": "quick", "script": "checks/quick.sh", "metrics": "quick.json", "time_limit_s": 60}
    (root / "scienceslack.json").write_text(json.dumps(rules_with_checks(quick), indent=2))
    for earlier in EARLIER_RULES:  # the seed replays the benchmark's earlier versions first: with the quick check too
        rules = json.loads((REPO / earlier).read_text())
        rules["checks"] = [quick]
        (root / earlier).parent.mkdir(parents=True, exist_ok=True)
        (root / earlier).write_text(json.dumps(rules, indent=2))
    (root / "checks" / "quick.sh").write_text(metrics_script(BROKEN))
    shutil.copytree(REPO / "kernels" / "problems", root / "kernels" / "problems")
    (root / "AGENTS.md").write_text("# agents\n")
    return root


def kb(env, cwd, *args):
    command = [sys.executable, "-m", "services.cli.main", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=200)


async def test_kb_push_prints_its_check_and_wait_follows_it_to_the_verdict(log, home, service, tmp_path):
    ingest = Ingest(log, HostedRepo(home / "repo.git"))
    await ingest.start()
    await seed(ingest, home, project=project(tmp_path))
    server = await start_server(
        "ingest", lambda s: add_ingest(s, ingest), port=0, pool=log.pool, options=server_options(64 << 20)
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_", "GIT_"))}
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        KB_INGEST_ADDR=f"127.0.0.1:{server.port}",
        KB_VERIFIER_ADDR=service.address,
        KB_TOKEN=service.token,
        KB_WEB_URL="http://board.example",
        GIT_AUTHOR_NAME="a",
        GIT_AUTHOR_EMAIL="a@example.org",
        GIT_COMMITTER_NAME="a",
        GIT_COMMITTER_EMAIL="a@example.org",
    )
    try:
        for step in (["route", "start", "thread"], ["clone", "--route", "thread"]):
            done = await asyncio.to_thread(kb, env, tmp_path, *step)
            assert done.returncode == 0, done.stderr
        clone = tmp_path / "kb-thread"
        route = clone / "routes" / "thread"
        route.mkdir(parents=True)
        (route / "new_gelu.py").write_text("# a kernel\n")
        subprocess.run(["git", "add", "routes"], cwd=clone, env=env, check=True)
        subprocess.run(["git", "commit", "-qm", "first"], cwd=clone, env=env, check=True)
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()

        pushed = await asyncio.to_thread(kb, env, clone, "push", "--json")
        assert pushed.returncode == 0, pushed.stderr
        data = json.loads(pushed.stdout)
        [queued] = data["checks"]
        assert queued["check_name"] == "quick" and data["follow"] == f"kb checks --sha {sha} --watch"
        assert data["pages"] == [f"http://board.example/route/thread/check/{queued['check_id']}"]

        (route / "broken.txt").write_text("x\n")
        subprocess.run(["git", "add", "routes"], cwd=clone, env=env, check=True)
        subprocess.run(["git", "commit", "-qm", "broken"], cwd=clone, env=env, check=True)
        waited = await asyncio.to_thread(kb, env, clone, "push", "--wait")
        assert waited.returncode == 1, waited.stdout + waited.stderr  # the check failed: so does the push's wait
        out = waited.stdout
        assert "checks queued:" in out and "follow them: kb checks --sha" in out
        assert "result  failed" in out and "score   —" in out
        assert "- new_gelu: class 9 (library calls)" in out
        assert "page    http://board.example/route/thread/check/" in out
    finally:
        await server.stop(0)
