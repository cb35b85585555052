"""Loaded first by every pytest run under tests/.

hypothesis is imported here, at the session's start, and not left to hypothesis' own pytest plugin, which imports it
at the session's end (pytest_terminal_summary) in a run that has no property-based test (make e2e). That late import
goes through pytest's assertion rewriter and hypothesis' own decorators, both of which call ast.parse, while the
garbage the session left (asyncio tasks, transports) is being collected; a finalizer that formats a traceback parses
source too (Python 3.11 places its carets with ast), and CPython before 3.11.8 (Debian 12 ships 3.11.2) shares one
AST recursion counter between the two parses: "SystemError: AST constructor recursion depth mismatch", exit 1 after
every test passed (CPython gh-106905, fixed in 3.11.8).
"""

import hypothesis  # noqa: F401
