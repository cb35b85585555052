"""Every identifier and cross-service rule is decided in contracts/, once: this walks the code outside contracts/ (the
services, the checks, the local deployment) and fails on

- a grammar: a regular expression written outside contracts/ (the names of refs, routes, jobs, principals, objects,
  tokens are contracts.names'), except the parsers of formats other programs write, listed below with why;
- a role comparison: a role compared, ordered or looked up outside contracts/access.py, the one place that decides
  what a role may do;
- a spelt identifier: an f-string that builds an event stream name (``route:{r}``), a principal's or operator's name,
  a NATS subject from the subject prefix, or a ref, route folder or short form (``routes/{r}``, ``refs/...``) instead
  of asking contracts.names;
- a check's exit code (``EXIT_* = ...``) decided outside contracts.metrics;
- a route's owner read from its RouteStarted (``event.route_started.owner``) outside services/common/routes.py, the
  one way every service finds it (the board's fold folds the event as it folds every other);
- a second spelling of a refusal: ``Refusal("NOT_FOUND", ...)`` where contracts.refusals has a helper
  (``not_found(...)``) for each status.

It replaces bench/contracts/cross_service_rules.sh, which grepped for the spellings of the code before issue 12.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WALKED = ("services", "checks", "deploy", "kernels")  # bench/ and tests/ are the project's own tools

# Regular expressions over text other programs write: no identifier of ours is decided there.
FOREIGN_FORMATS = {
    "services/scheduler/directives.py": "Slurm's time and memory formats (sbatch(1))",
    "services/common/eventlog.py": "PostgreSQL's unique-violation message",
    "services/common/migrate.py": "the migration files' names in services/*/migrations",
    "deploy/local/components.py": "ss(8)'s output",
    "services/verifier/harness/recorder.py": "CUDA kernel names the profiler reports",
}
REGEX_CALLS = {"compile", "fullmatch", "match", "search", "findall", "finditer", "sub", "subn", "split"}
STREAM_KINDS = {"route", "job", "pull", "issue", "check", "benchmark", "principal", "deadletter", "rules", "main"}
IDENTITY_KINDS = {"system", "operator"}  # principal and operator names: contracts.names
ROLE_MODULE = "contracts/access.py"
ROUTE_OWNER_MODULE = "services/common/routes.py"
# The hosted repository's refs and a route's folder (a clone's own refs/remotes/* are git's, not ours).
HOSTED_PREFIXES = ("refs/heads/", "refs/tags/", "refs/jobs/", "refs/pull/", "routes/")


def _python_files():
    for top in WALKED:
        for path in sorted((ROOT / top).rglob("*.py")):
            if ".venv" not in path.parts and "__pycache__" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), path


def _is_role(node: ast.AST) -> bool:
    """A role value: ``x.role``, a variable named ``role``/``*_role``, or a ``ROLE_*`` constant."""
    if isinstance(node, ast.Attribute):
        return node.attr == "role" or node.attr.endswith("_role") or node.attr.startswith("ROLE_")
    if isinstance(node, ast.Name):
        return node.id == "role" or node.id.endswith("_role") or node.id.startswith("ROLE_")
    if isinstance(node, ast.Tuple):
        return any(_is_role(element) for element in node.elts)
    return False


def _literal_head(node: ast.JoinedStr) -> str:
    """The f-string's text up to its first replacement field."""
    head = ""
    for part in node.values:
        if not isinstance(part, ast.Constant):
            break
        head += part.value
    return head


def _mentions(node: ast.AST, attribute: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == attribute for n in ast.walk(node))


def _spells_a_ref(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(HOSTED_PREFIXES)


def _names_an_exit_code(target: ast.AST) -> bool:
    elements = target.elts if isinstance(target, ast.Tuple) else [target]
    return any(isinstance(e, ast.Name) and e.id.startswith("EXIT_") for e in elements)


def violations(relative: str, source: str) -> list[str]:
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        where = f"{relative}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Refusal":
            if node.args and isinstance(node.args[0], ast.Constant):
                found.append(f"{where}: Refusal({node.args[0].value!r}, ...), not its contracts.refusals helper")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in REGEX_CALLS:
            target = node.func.value
            if isinstance(target, ast.Name) and target.id == "re" and relative not in FOREIGN_FORMATS:
                found.append(f"{where}: a grammar (re.{node.func.attr}) outside contracts/")
        elif isinstance(node, ast.Compare) and relative != ROLE_MODULE:
            if any(_is_role(operand) for operand in (node.left, *node.comparators)):
                found.append(f"{where}: a role comparison outside {ROLE_MODULE}")
        elif isinstance(node, ast.Attribute) and node.attr == "owner" and _mentions(node.value, "route_started"):
            if relative != ROUTE_OWNER_MODULE:
                found.append(f"{where}: a route's owner found outside {ROUTE_OWNER_MODULE}")
        elif isinstance(node, ast.Assign) and any(_names_an_exit_code(target) for target in node.targets):
            found.append(f"{where}: a check's exit code decided outside contracts.metrics")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _spells_a_ref(node.left):
            found.append(f"{where}: a ref or route folder spelt ({node.left.value} + ...), not contracts.names")
        elif isinstance(node, ast.JoinedStr) and len(node.values) > 1:
            head = _literal_head(node)
            kind = re.match(r"([a-z]+):(?! )", head)
            if kind and kind[1] in STREAM_KINDS:
                found.append(f"{where}: a stream name spelt ({head}...), not contracts.names")
            elif kind and kind[1] in IDENTITY_KINDS:
                found.append(f"{where}: an identity spelt ({head}...), not contracts.names")
            elif head.startswith(HOSTED_PREFIXES):
                found.append(f"{where}: a ref or route folder spelt ({head}...), not contracts.names")
            elif _mentions(node, "events_subject_prefix"):
                found.append(f"{where}: a NATS subject spelt, not contracts.names")
    return found


def test_no_identifier_grammar_role_comparison_or_spelt_stream_outside_contracts():
    found = []
    for relative, path in _python_files():
        if relative.startswith("contracts/"):
            continue
        found += violations(relative, path.read_text())
    assert not found, "decided outside contracts/:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source, what",
    [
        ('import re\nSHA = re.compile(r"^[0-9a-f]{40}$")\n', "a grammar"),
        ("def ok(actor, events_pb2):\n    return actor.role >= events_pb2.ROLE_MEMBER\n", "a role comparison"),
        ("def f(p):\n    return p.role == 2\n", "a role comparison"),
        ('def s(route):\n    return f"route:{route}"\n', "a stream name"),
        ('def s(n):\n    return f"pull:{n}"\n', "a stream name"),
        ('def s(r):\n    return f"routes/{r}/metrics.json"\n', "a ref or route folder"),
        ('def s(v):\n    return "refs/heads/" + v\n', "a ref or route folder"),
        ("EXIT_PASSED, EXIT_BROKEN, EXIT_COULD_NOT_RUN = 0, 1, 2\n", "exit code"),
        ('def s(settings):\n    return f"{settings.events_subject_prefix}.>"\n', "a NATS subject"),
        ('def s(name):\n    return f"system:consumer:{name}"\n', "an identity"),
        ('def r():\n    raise Refusal("NOT_FOUND", "unknown_pull", "no such pull request")\n', "not its contracts"),
        ("async def owner(log, s):\n    return (await log.read_stream(s))[0].route_started.owner\n", "route's owner"),
    ],
)
def test_the_walk_sees_each_kind_of_decision(source, what):
    assert any(what in line for line in violations("services/example.py", source))


def test_the_walk_leaves_plain_text_alone():
    source = 'import sys\ndef f(m, role_names):\n    print(f"kb: {m}", file=sys.stderr)\n    return role_names\n'
    assert violations("services/example.py", source) == []
