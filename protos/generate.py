"""Generate the Python code of protos/kernelboard/v1 with grpcio-tools (``make proto``).

The generated ``*_pb2.py``, ``*_pb2.pyi`` and ``*_pb2_grpc.py`` files are written beside their sources and committed;
tests/test_protos.py regenerates them into a temporary folder and fails when the committed ones are stale.
"""

import sys
from pathlib import Path

from grpc_tools import protoc

PROTO_ROOT = Path(__file__).resolve().parent


def proto_files() -> list[Path]:
    return sorted((PROTO_ROOT / "kernelboard" / "v1").glob("*.proto"))


def generate(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *[str(p.relative_to(PROTO_ROOT)) for p in proto_files()],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed; see its message above")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_ROOT)
