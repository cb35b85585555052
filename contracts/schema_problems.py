"""The schema problems of a JSON document, from jsonschema or from this module's own reader, described one way.

contracts.rules validates scienceslack.json with jsonschema where it is installed (the services) and with ``Reader``
where it is not (the GPU harness and the check script run with stdlib and torch only); both give the same Problems,
in the same order, and ``describe`` words each one for the RulesError (tests/contracts/test_rules.py runs every case
through both). Standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


@dataclass(frozen=True)
class Problem:
    """One schema keyword an instance breaks: the keyword, the instance's path, the keyword's value, the instance,
    the subschema holding the keyword, and whether it was found checking a property's name."""

    kind: str
    path: tuple
    expected: object
    value: object
    schema: Mapping
    in_property_names: bool = False
    message: str = ""


def jsonschema_problems(schema: Mapping, data) -> Iterator[Problem]:
    """The problems jsonschema (Draft 2020-12) finds, as Problems."""
    import jsonschema

    for error in jsonschema.Draft202012Validator(schema).iter_errors(data):
        yield Problem(
            error.validator,
            tuple(error.absolute_path),
            error.validator_value,
            error.instance,
            error.schema,
            "propertyNames" in error.absolute_schema_path,
            error.message,
        )


def _is_type(value, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if name == "integer":  # as in JSON Schema: 1.0 is an integer
        return isinstance(value, int) or (math.isfinite(value) and value.is_integer())
    return name == "number"


def _equal(a, b) -> bool:
    """JSON equality: true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


class Reader:
    """The keywords scienceslack.schema.json uses, checked in the schema's order as jsonschema does, so that both
    readers name the same problems in the same order. A keyword it does not know is a bug here: it raises."""

    def __init__(self, root: Mapping):
        self.root = root

    def problems(self, value, subschema: Mapping | None = None, path: tuple = ()) -> Iterator[Problem]:
        subschema = self.root if subschema is None else subschema
        for kind, expected in subschema.items():
            check = getattr(self, "_" + kind.replace("$", "dollar_").replace("-", "_"), None)
            if check is None:
                raise NotImplementedError(f"scienceslack.schema.json uses {kind!r}, which contracts.rules cannot read")
            yield from check(expected, value, subschema, path)

    def _problem(self, kind, path, expected, value, subschema, **more) -> Problem:
        return Problem(kind, path, expected, value, subschema, **more)

    # annotations: nothing to check
    def _dollar_schema(self, *_):
        return ()

    _dollar_id = _title = _dollar_defs = _description = _dollar_schema

    def _x_error(self, *_):
        return ()

    def _dollar_ref(self, ref, value, _subschema, path):
        target = self.root
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        yield from self.problems(value, target, path)

    def _type(self, expected, value, subschema, path):
        if not _is_type(value, expected):
            yield self._problem("type", path, expected, value, subschema)

    def _enum(self, expected, value, subschema, path):
        if not any(_equal(value, option) for option in expected):
            yield self._problem("enum", path, expected, value, subschema)

    def _const(self, expected, value, subschema, path):
        if not _equal(value, expected):
            yield self._problem("const", path, expected, value, subschema)

    def _required(self, expected, value, subschema, path):
        if isinstance(value, dict):
            for name in expected:
                if name not in value:
                    yield self._problem("required", path, expected, value, subschema)

    def _properties(self, expected, value, _subschema, path):
        if isinstance(value, dict):
            for name, child in expected.items():
                if name in value:
                    yield from self.problems(value[name], child, (*path, name))

    def _additionalProperties(self, expected, value, subschema, path):
        if not isinstance(value, dict):
            return
        extras = [key for key in value if key not in subschema.get("properties", {})]
        if expected is False:
            if extras:
                yield self._problem("additionalProperties", path, expected, value, subschema)
        else:
            for key in extras:
                yield from self.problems(value[key], expected, (*path, key))

    def _propertyNames(self, expected, value, _subschema, path):
        if isinstance(value, dict):
            for key in value:
                for problem in self.problems(key, expected, path):
                    yield Problem(problem.kind, path, problem.expected, key, expected, in_property_names=True)

    def _items(self, expected, value, _subschema, path):
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from self.problems(item, expected, (*path, index))

    def _allOf(self, expected, value, _subschema, path):
        for child in expected:
            yield from self.problems(value, child, path)

    def _contains(self, expected, value, subschema, path):
        if isinstance(value, list) and not any(not list(self.problems(item, expected, path)) for item in value):
            yield self._problem("contains", path, expected, value, subschema)

    def _uniqueItems(self, expected, value, subschema, path):
        if expected and isinstance(value, list):
            if any(_equal(a, b) for i, a in enumerate(value) for b in value[i + 1 :]):
                yield self._problem("uniqueItems", path, expected, value, subschema)

    def _minimum(self, expected, value, subschema, path):
        if _is_type(value, "number") and value < expected:
            yield self._problem("minimum", path, expected, value, subschema)

    def _exclusiveMinimum(self, expected, value, subschema, path):
        if _is_type(value, "number") and value <= expected:
            yield self._problem("exclusiveMinimum", path, expected, value, subschema)

    def _minItems(self, expected, value, subschema, path):
        if isinstance(value, list) and len(value) < expected:
            yield self._problem("minItems", path, expected, value, subschema, message=f"fewer than {expected} items")

    def _minProperties(self, expected, value, subschema, path):
        if isinstance(value, dict) and len(value) < expected:
            yield self._problem("minProperties", path, expected, value, subschema, message=f"fewer than {expected}")

    def _minLength(self, expected, value, subschema, path):
        if isinstance(value, str) and len(value) < expected:
            yield self._problem("minLength", path, expected, value, subschema, message=f"shorter than {expected}")

    def _pattern(self, expected, value, subschema, path):
        if isinstance(value, str) and re.search(expected, value) is None:
            yield self._problem("pattern", path, expected, value, subschema, message=f"does not match {expected!r}")


def field_path(parts) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def json_type(value) -> str:
    return "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)


def describe(problem: Problem) -> list[str]:
    """Readable lines for a schema problem: the field path, then the problem in words."""
    path, kind, expected, value = list(problem.path), problem.kind, problem.expected, problem.value
    if kind == "required":
        return [f"{field_path([*path, name])}: required field missing" for name in expected if name not in value]
    if kind == "additionalProperties":
        known = problem.schema.get("properties", {})
        return [f"{field_path([*path, key])}: unknown key" for key in value if key not in known]
    if problem.in_property_names:
        return [f"{field_path([*path, value])}: {problem.schema.get('x-error', problem.message)}"]
    return [_describe_value(problem, path, kind, expected, value)]


def _describe_value(problem: Problem, path, kind, expected, value) -> str:
    if kind == "type":
        return f"{field_path(path)}: must be {_article(expected)} {expected}, got {json_type(value)} {value!r}"
    if kind == "enum":
        return f"{field_path(path)}: {value!r} is not one of {', '.join(map(str, expected))}"
    if kind == "contains":
        return f"{field_path(path)}: missing {expected.get('const')!r}"
    if kind == "minimum":
        return f"{field_path(path)}: {value!r} is less than the minimum of {expected}"
    if kind == "exclusiveMinimum":
        return f"{field_path(path)}: {value!r} must be greater than {expected}"
    if kind in ("minItems", "minProperties", "minLength") and expected == 1:
        return f"{field_path(path)}: must not be empty"
    if kind == "uniqueItems":
        repeated = sorted({str(item) for item in value if value.count(item) > 1})
        return f"{field_path(path)}: repeats {', '.join(repeated)}"
    if "x-error" in problem.schema:
        return f"{field_path(path)}: {value!r} {problem.schema['x-error']}"
    return f"{field_path(path)}: {problem.message}"


def _article(type_name) -> str:
    return "an" if str(type_name)[:1] in "aeiou" else "a"
