"""What the scheduler's tests share about a job: whether it has settled, and a file of its result commit."""

import subprocess

from services.common import hostedgit


def settled(job) -> bool:
    return job.finished and bool(job.result_sha or job.result_error)


def show(stack, sha: str, path: str) -> str:
    repo = str(hostedgit.location(stack.home))
    return subprocess.check_output(["git", "--git-dir", repo, "show", f"{sha}:{path}"], text=True)
