"""What every ``kb`` subcommand needs to talk to the services: the stored sign-in and authenticated channels."""

import json
import os
from pathlib import Path

from services.common.config import Settings


class NotSignedIn(Exception):
    pass


def credentials_path() -> Path:
    """``KB_CREDENTIALS`` or ~/.config/kernelboard/credentials.json (written by ``kb login``, mode 600)."""
    return Path(os.environ.get("KB_CREDENTIALS", Path.home() / ".config" / "kernelboard" / "credentials.json"))


def save_token(token: str) -> Path:
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(json.dumps({"token": token}))
    return path


def load_token() -> str:
    """``KB_TOKEN`` wins over the stored sign-in, so agents and scripts can act without ``kb login``."""
    if token := os.environ.get("KB_TOKEN"):
        return token
    path = credentials_path()
    if not path.exists():
        raise NotSignedIn(f"not signed in: run `kb login` or set KB_TOKEN (no {path})")
    return json.loads(path.read_text())["token"]


def metadata(token: str | None = None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token or load_token()}"),)


def channel(service: str):
    """An insecure channel to a service at ``KB_<SERVICE>_ADDR`` or its fixed local port."""
    import grpc

    return grpc.insecure_channel(Settings.from_env().grpc_address(service))


def web_url() -> str:
    """The web board's address, for the pages the CLI points at: ``KB_WEB_URL`` or the local stack's."""
    from services.common.config import HTTP_PORTS

    return os.environ.get("KB_WEB_URL", f"http://127.0.0.1:{HTTP_PORTS['web']}").rstrip("/")
