"""`kb` as agents and maintainers use it, as a real subprocess against the running service and real git clones."""

import asyncio
import json
import os
import subprocess
import sys

from kernelboard.v1 import events_pb2

from services.common import auth
from services.common.eventlog import payload_of


class Kb:
    def __init__(self, stack, tmp_path):
        self.stack = stack
        self.env = {
            **os.environ,
            "KB_INGEST_ADDR": f"127.0.0.1:{stack.port}",
            "KB_VERIFIER_ADDR": "127.0.0.1:1",  # no verifier here: kb pr show says its checks are unavailable
            "KB_CREDENTIALS": str(tmp_path / "credentials.json"),
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
        self.env.pop("KB_TOKEN", None)

    async def __call__(self, *args: str, as_: str | None = None, ok: bool = True) -> tuple[int, str, str]:
        env = dict(self.env, KB_TOKEN=self.stack.tokens[as_]) if as_ else self.env
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "services.cli.main",
            *args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        result = proc.returncode, out.decode(), err.decode()
        if ok:
            assert proc.returncode == 0, result
        return result

    async def json(self, *args: str, as_: str | None = None) -> dict:
        return json.loads((await self(*args, "--json", as_=as_))[1])


def commit(clone, files: dict[str, str], message: str = "work") -> str:
    for name, text in files.items():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text(text)
    base = ["git", "-c", "user.name=agent", "-c", "user.email=a@example.org", "-C", str(clone)]
    subprocess.run([*base, "add", "-A"], check=True)
    subprocess.run([*base, "commit", "-q", "-m", message], check=True)
    return subprocess.run([*base, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


async def test_agent_workflow_from_login_to_merge_and_rules_approval(stack, tmp_path):
    kb = Kb(stack, tmp_path)
    _, out, _ = await kb("login", "--token", stack.tokens["alice/agent-1"])
    assert "signed in as alice/agent-1 (agent of alice, member)" in out
    assert oct(os.stat(tmp_path / "credentials.json").st_mode & 0o777) == "0o600"
    assert (await kb.json("whoami"))["owner"] == "alice"

    route = await kb.json("route", "start", "cli-route")
    assert route["owner"] == "alice"
    assert "cli-route" in (await kb("routes"))[1]
    clone = tmp_path / "clone"
    await kb("clone", "--route", "cli-route", str(clone))
    first = commit(clone, {"routes/cli-route/matmul.py": "class ModelNew: pass\n"})
    pushed = await kb.json("push", "-C", str(clone))
    assert (pushed["sha"], pushed["parent"]) == (first, route["head"])
    second = commit(clone, {"routes/cli-route/metrics.json": json.dumps({"score": 1.2, "cost": 3, "subtasks": []})})
    pushed = await kb.json("push", "-C", str(clone))
    assert (pushed["sha"], pushed["parent"], pushed["metrics_reported"]) == (second, first, True)

    commit(clone, {"kernels/problems/matmul.py": "cheat = True\n"})
    code, _, err = await kb("push", "-C", str(clone), ok=False)
    assert code == 1 and "INVALID_ARGUMENT" in err and "'kernels/problems/matmul.py' outside routes/cli-route/" in err
    subprocess.run(["git", "-C", str(clone), "reset", "-q", "--hard", second], check=True)

    pull = await kb.json("pr", "open", "-C", str(clone), "--title", "first kernels", "--body", "matmul, plainly")
    number = str(pull["number"])
    assert pull["body"] == "matmul, plainly"
    code, _, err = await kb("pr", "merge", number, ok=False)
    assert code == 1 and "PERMISSION_DENIED" in err and "maintainer role needed" in err
    code, _, err = await kb("pr", "review", number, "--approve", ok=False)  # alice/agent-1 opened it
    assert code == 1 and "PERMISSION_DENIED" in err and "of its own side" in err
    await kb("pr", "review", number, "--comment", "-m", "the tile is 64 wide", as_="alice")
    await kb("pr", "review", number, "--approve", "-m", "good", as_="curator")
    await kb("pr", "comment", number, "-m", "merging after the check", as_="curator")
    [listed] = [p for p in (await kb.json("pr", "list"))["pull_requests"] if p["number"] == pull["number"]]
    assert [(r["reviewer"], r["verdict"]) for r in listed["reviews"]] == [("alice", "comment"), ("curator", "approve")]
    _, shown, _ = await kb("pr", "show", number)
    assert "matmul, plainly" in shown and "files: 2 changed, +2 -0" in shown, shown
    assert "reviews: 1 approve, 1 comment" in shown and "checks: not available (UNAVAILABLE" in shown, shown
    _, conversation, _ = await kb("pr", "comments", number)
    assert [line.split(",")[0] for line in conversation.splitlines() if line.startswith("--- ")] == [
        "--- alice",
        "--- curator",
        "--- curator",
    ]
    assert "approve: good" in conversation and "merging after the check" in conversation
    merged = await kb.json("pr", "merge", str(pull["number"]), as_="curator")
    assert merged["state"] == "merged" and merged["reviews"][-1]["reviewer"] == "curator"

    main = tmp_path / "main"
    await kb("clone", str(main), as_="curator")
    assert (main / "routes" / "cli-route" / "matmul.py").exists()
    code, _, err = await kb("rules", "approve", "-C", str(main), ok=False)
    assert code == 1 and "PERMISSION_DENIED" in err
    approved = await kb.json("rules", "approve", "-C", str(main), as_="curator")
    assert approved["rules_approved"] and approved["sha"] == merged["merge_sha"]
    last = payload_of((await stack.events("RulesApproved"))[-1])
    assert last.rules_commit == merged["merge_sha"]

    fetched = await kb.json("fetch", "-C", str(clone))
    assert 0 < fetched["bytes"] < (tmp_path / "main" / ".git" / "kb" / "origin.bundle").stat().st_size
    tracking = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "origin/main"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert tracking == merged["merge_sha"]
    assert (await kb("fetch", "-C", str(clone)))[1].strip() == "up to date"


async def test_tokens_from_the_cli(stack, tmp_path):
    kb = Kb(stack, tmp_path)
    created = await kb.json("token", "create", "bob/agent-7", as_="bob")
    assert created["registered"] and created["principal"]["kind"] == "agent"
    await kb("login", "--token", created["token"])
    code, _, err = await kb("route", "start", "X", ok=False)
    assert code == 1 and "INVALID_ARGUMENT" in err and "'X'" in err
    await kb("token", "revoke", created["token"], as_="bob")
    code, _, err = await kb("whoami", ok=False)
    assert code == 1 and "UNAUTHENTICATED" in err and "revoked" in err


async def test_issues_comments_and_joining_from_the_cli(stack, tmp_path):
    kb = Kb(stack, tmp_path)
    opened = await kb.json("issue", "open", "--title", "cumsum_reverse slow", "--body", "2x slower", as_="mallory")
    number = opened["number"]
    assert "commented on issue" in (await kb("issue", "comment", str(number), "-m", "same here", as_="bob"))[1]
    shown = await kb.json("issue", "show", str(number), as_="alice")
    assert (shown["title"], shown["state"]) == ("cumsum_reverse slow", "open")
    assert [(c["author"], c["body"]) for c in shown["thread"]] == [("bob", "same here")]
    code, _, err = await kb("issue", "close", str(number), as_="bob", ok=False)
    assert code == 1 and "PERMISSION_DENIED" in err and "only the author" in err
    assert (await kb.json("issue", "close", str(number), as_="mallory"))["state"] == "closed"
    assert number not in [i["number"] for i in (await kb.json("issue", "list", "--state", "open", as_="bob"))["issues"]]
    assert (await kb.json("issue", "reopen", str(number), as_="curator"))["state"] == "open"
    listed = await kb("issue", "list", "--limit", "1", as_="bob")
    assert len(listed[1].strip().splitlines()) == 1

    code, _, err = await kb("pr", "comment", "999", "-m", "hi", as_="bob", ok=False)
    assert code == 1 and "NOT_FOUND" in err

    async with stack.log.pool.acquire() as conn:
        await auth.register_principal(conn, "gina", 1, "gina", events_pb2.ROLE_SIGNED_IN, log=stack.log, actor="test")
        stack.tokens["gina"] = await auth.issue_token(conn, "gina")
    assert "asked to join" in (await kb("join", "--note", "hello", as_="gina"))[1]
    requests = await kb.json("members", "requests", as_="curator")
    assert ("gina", "hello") in [(r["name"], r["note"]) for r in requests["requests"]]
    code, _, err = await kb("members", "accept", "gina", as_="gina", ok=False)
    assert code == 1 and "maintainer role" in err
    assert "gina is a project member now" in (await kb("members", "accept", "gina", as_="curator"))[1]
    assert (await kb.json("whoami", as_="gina"))["role"] == "member"
    assert (await kb.json("members", "leave", as_="gina"))["role"] == "signed-in"
