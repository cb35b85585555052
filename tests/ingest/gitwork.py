"""A working git clone for tests: commits files and makes bundles the way `kb push` does."""

import subprocess
from pathlib import Path


class WorkClone:
    def __init__(self, path: Path, author: str = "tester"):
        self.path = path
        self.author = author

    def git(self, *args: str, input: bytes | None = None) -> bytes:
        env_args = ["-c", f"user.name={self.author}", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main"]
        return subprocess.run(
            ["git", *env_args, "-C", str(self.path), *args], check=True, capture_output=True, input=input
        ).stdout

    @classmethod
    def init(cls, path: Path, author: str = "tester") -> "WorkClone":
        path.mkdir(parents=True)
        clone = cls(path, author)
        clone.git("init", "-q", "-b", "main")
        return clone

    def commit(self, files: dict[str, str | None], message: str = "change") -> str:
        for name, content in files.items():
            target = self.path / name
            if content is None:
                self.git("rm", "-q", name)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            self.git("add", name)
        self.git("commit", "-q", "-m", message)
        return self.head()

    def head(self, rev: str = "HEAD") -> str:
        return self.git("rev-parse", rev).decode().strip()

    def bundle(self, ref: str, *exclude: str) -> bytes:
        args = ["bundle", "create", "-q", "-", ref]
        if exclude:
            args += ["--not", *exclude]
        return self.git(*args)
