"""What a user does on the private stack, through `kb` and git, as the end-to-end tests drive it: start and clone a
route, commit and push, a token, a command's JSON, and the checks the verifier completed for a commit."""

import json
import subprocess
from pathlib import Path

from tests.e2e.invariants import read_log


def git(*argv, cwd: Path, env) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def kb_json(stack, *argv, token, cwd=None):
    return json.loads(stack.kb(*argv, "--json", token=token, cwd=cwd).stdout)


async def completed_checks(stack, sha: str) -> list:
    return [
        e.check_completed
        for e in await read_log(stack.database_url)
        if e.WhichOneof("payload") == "check_completed" and e.check_completed.sha == sha
    ]


def issue_token(stack, name: str) -> str:
    return stack.kb("admin", "token", "issue", name).stdout.strip().splitlines()[-1].split()[-1]


def start_and_clone(stack, route: str, token: str) -> Path:
    stack.kb("route", "start", route, token=token)
    clone = stack.root / f"clone-{route}"
    stack.kb("clone", str(clone), "--route", route, token=token)
    return clone


def commit_and_push(stack, clone: Path, token: str, message: str) -> str:
    env = stack.env()
    git("add", "-A", cwd=clone, env=env)
    git("commit", "-q", "-m", message, cwd=clone, env=env)
    stack.kb("push", "-C", str(clone), token=token)
    return git("rev-parse", "HEAD", cwd=clone, env=env)
