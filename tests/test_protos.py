"""The generated code under protos/ is what `make proto` makes of the .proto files today."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GENERATED = REPO / "protos" / "kernelboard" / "v1"


def load_generator():
    spec = importlib.util.spec_from_file_location("generate", REPO / "protos" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_is_fresh(tmp_path):
    load_generator().generate(tmp_path)
    fresh = {p.name: p.read_bytes() for p in (tmp_path / "kernelboard" / "v1").iterdir() if p.is_file()}
    committed = {p.name: p.read_bytes() for p in GENERATED.glob("*_pb2*.py*")}
    assert fresh.keys() == committed.keys(), "generated files differ in name: run `make proto`"
    stale = sorted(name for name in fresh if fresh[name] != committed[name])
    assert not stale, f"stale generated code, run `make proto`: {stale}"


def test_every_event_payload_is_a_message_named_like_its_type():
    from kernelboard.v1 import events_pb2

    oneof = events_pb2.Event.DESCRIPTOR.oneofs_by_name["payload"]
    assert len(oneof.fields) >= 19
    for field in oneof.fields:
        assert field.message_type.containing_type is None
        assert field.message_type.full_name.startswith("kernelboard.v1.")
