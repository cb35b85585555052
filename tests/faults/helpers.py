"""An agent's work clone that pushes over gRPC (git bundles, as `kb push` sends them), and small waits on the log."""

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import grpc
from kernelboard.v1 import ingest_pb2


async def git(cwd: Path, *argv: str, env: dict) -> str:
    proc = await asyncio.create_subprocess_exec(
        "git", *argv, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(argv)}: {err.decode()}")
    return out.decode()


class RouteClone:
    def __init__(self, route: str, token: str, path: Path, env: dict):
        self.route, self.path, self.env = route, path, env
        self.ref = f"refs/heads/routes/{route}"
        self.md = (("authorization", f"Bearer {token}"),)
        self.base = ""
        self.failed_pushes = 0  # calls that failed (push_with_retry), whether or not they landed

    async def start(self, ingest) -> "RouteClone":
        await ingest.StartRoute(ingest_pb2.StartRouteRequest(route=self.route), metadata=self.md)
        await self.sync(ingest)
        return self

    async def sync(self, ingest) -> None:
        """(Re)clone from the hosted route: after a failed push we may not know whether it landed."""
        reply = await ingest.Fetch(ingest_pb2.FetchRequest(refs=[f"routes/{self.route}"]), metadata=self.md)
        bundle = self.path.with_suffix(".bundle")
        bundle.write_bytes(reply.bundle)
        shutil.rmtree(self.path, ignore_errors=True)
        await git(
            self.path.parent, "clone", "-q", "-b", f"routes/{self.route}", str(bundle), str(self.path), env=self.env
        )
        self.base = (await git(self.path, "rev-parse", "HEAD", env=self.env)).strip()
        (self.path / "routes" / self.route).mkdir(parents=True, exist_ok=True)

    async def commit(self, files: dict[str, str], message: str = "change") -> bytes:
        for name, text in files.items():
            (self.path / "routes" / self.route / name).write_text(text)
        await git(self.path, "add", "-A", env=self.env)
        await git(self.path, "commit", "-q", "-m", message, env=self.env)
        return await self.bundle()

    async def bundle(self) -> bytes:
        proc = await asyncio.create_subprocess_exec(
            "git",
            "bundle",
            "create",
            "-q",
            "-",
            self.ref,
            f"^{self.base}",
            cwd=self.path,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"git bundle: {err.decode()}")
        return out

    async def push_metrics(self, ingest, score: float, extra: dict[str, str] | None = None) -> str:
        """Commit metrics.json with ``score`` (and ``extra`` files) and push it; returns the pushed sha."""
        files = {"metrics.json": json.dumps({"score": score, "cost": 0.0, "subtasks": []}), **(extra or {})}
        current = self.path / "routes" / self.route / "metrics.json"
        if current.exists() and current.read_text() == files["metrics.json"] and not extra:
            return self.base  # an earlier try landed before its reply was lost
        bundle = await self.commit(files, f"score {score}")
        reply = await ingest.Push(ingest_pb2.PushRequest(ref=self.ref, bundle=bundle), metadata=self.md, timeout=60)
        self.base = reply.sha
        return reply.sha


def payloads(events, kind: str) -> list:
    return [getattr(e, kind) for e in events if e.WhichOneof("payload") == kind]


async def push_with_retry(clone: RouteClone, ingest, score: float, deadline_s: float = 60) -> str:
    """A client that keeps trying while a component is down, as an agent would (resyncing after a failure)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + deadline_s
    while True:
        try:
            return await clone.push_metrics(ingest, score)
        except grpc.RpcError:
            clone.failed_pushes += 1
            if loop.time() > deadline:
                raise
        # Whether that push landed is unknown until the clone is back in step with the hosted route.
        while True:
            await asyncio.sleep(0.5)
            try:
                await clone.sync(ingest)
                break
            except grpc.RpcError:
                if loop.time() > deadline:
                    raise


def squeue_state(stack, job_id: str) -> str:
    done = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=stack.env(), capture_output=True, text=True)
    return done.stdout.strip()
