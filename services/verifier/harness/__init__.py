"""The verifier's harness: judges a route's kernels against the 12 reference problems.

Pure torch + stdlib, so that it runs on the GPU machine, which has torch but neither nats-py, asyncpg, structlog nor
jsonschema. Importing this package is cheap (no torch); ``check.run_check`` does the work, ``main.main`` is the CLI
(``kb verify`` and ``python -m services.verifier.harness``).
"""
