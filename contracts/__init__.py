"""The contracts layer: what every service, the CLI, the verifier's harness and the check script agree on, decided
once. It sits between protos/ and services/common/ (docs/ARCHITECTURE.md, "Layers"): names (the grammar of every
identifier), refusals (errors that know their gRPC status), access (who may do what), rules (the typed
scienceslack.json), metrics (the check's and a route's own report), limits (every size a push, a request field or an
event may reach).

It imports the standard library only (plus the generated protos where a module says so), so that the harness and the
check script, which run with stdlib and torch alone, can import it too.
"""
