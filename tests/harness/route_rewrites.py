"""What several attack routes (tests/harness/attacks, tests/harness/cheats) do to the harness inside the candidate
process, from their own import: every class of the harness's modules (the candidate's own module runs as
``__main__``) gets its identity snapshot blinded and one of its methods wrapped. Nothing here needs more than the
language and ``sys.modules``, which any route file has; the routes import it so that each states only its attack."""

import sys


def rewrite_harness_method(method: str, wrap) -> None:
    """``wrap(original)`` in place of ``method`` on every harness class that defines it; ``Snapshot.changes`` made to
    see nothing, so that the candidate side reports no replaced callable."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "__main__" or name.startswith("services.")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type):
                if callable(vars(value).get("changes")):
                    value.changes = lambda self: []
                if callable(vars(value).get(method)):
                    setattr(value, method, wrap(vars(value)[method]))
