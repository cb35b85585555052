"""Size limits: how large anything a caller sends, or an event records, may be (docs/ARCHITECTURE.md, "Limits").
Decided once here; the tables of docs/limits.md and the protos' comments repeat these numbers.

Why an event limit at all: the relay publishes each event as one NATS message, and NATS refuses a message above its
max_payload (1 MiB by default). An event the bus cannot carry used to stop the relay at its position for good; now
the log refuses to record it (services/common/eventlog.py) and the relay skips what it still cannot publish.
"""

KIB = 1024
MIB = 1024 * KIB

# --- events (checked at append: services/common/eventlog.py) ------------------------------------------------------

# One event's payload, serialized. Below NATS's default max_payload (1 MiB) with room for the envelope and headers.
MAX_EVENT_BYTES = 768 * KIB
# Any text or bytes field of an event not named below; a repeated or message field counts its whole serialized size.
DEFAULT_EVENT_FIELD_BYTES = 4 * KIB
EVENT_FIELD_BYTES = {
    "CommitIngested.changed_paths": 256 * KIB,
    "MetricsReported.subtasks": 256 * KIB,
    "RulesApproved.rules_json": 256 * KIB,
    "JobResultCommitted.excluded": 64 * KIB,
    "CheckCompleted.reasons": 64 * KIB,
    "CheckCompleted.subtasks": 512 * KIB,
    "CheckCompleted.not_verified_because": 16 * KIB,
    "PullRequestOpened.title": 1 * KIB,
    "PullRequestOpened.body": 80 * KIB,
    "PullRequestReviewed.body": 64 * KIB,
    "RouteAdopted.note": 4 * KIB,
    "BenchmarkStatusChanged.reason": 4 * KIB,
    "CheckDisqualified.reason": 8 * KIB,
    "EventDeadLettered.error": 4 * KIB,
    # Free text a caller writes, at most its characters (below) in UTF-8's 4 bytes each.
    "IssueOpened.title": 1 * KIB,
    "IssueOpened.body": 80 * KIB,
    "CommentAdded.body": 80 * KIB,
    "JoinRequested.note": 4 * KIB,
    "JoinDecided.note": 4 * KIB,
}

# --- requests (checked at the RPC edge, each with its own message) ------------------------------------------------

# A pushed bundle (KB_MAX_BUNDLE_BYTES overrides). A unary Push may carry up to twice this before gRPC itself cuts it
# with its generic message-size error; PushStream (what `kb push` uses) is refused at the limit while it streams.
MAX_BUNDLE_BYTES = 64 * MIB
# One file (blob) a push brings, inflated: read from the object's header before anything reads the object. Above the
# scheduler's per-file limit for job results (10 MiB).
MAX_BLOB_BYTES = 16 * MIB
# All objects a push brings together, inflated (the verifier archives at most 256 MiB of a commit).
MAX_PUSH_INFLATED_BYTES = 256 * MIB
# routes/<route>/metrics.json, checked from its header before it is read.
MAX_METRICS_JSON_BYTES = 256 * KIB
# scienceslack.json (the rules a tag push approves).
MAX_RULES_JSON_BYTES = 256 * KIB
# Free text (checked at the RPC edge with contracts.names.text).
MAX_PULL_TITLE_CHARS = 200
MAX_PULL_BODY_CHARS = 20_000
MAX_REVIEW_BODY_CHARS = 64 * KIB
MAX_TOKEN_CHARS = 200
MAX_ISSUE_TITLE_CHARS = 200
MAX_ISSUE_BODY_CHARS = 20_000
MAX_COMMENT_CHARS = 20_000
MAX_JOIN_NOTE_CHARS = 1_000
# Lists in a request.
MAX_FETCH_REFS = 10_000  # refs a fetch may name; there are as many as routes, jobs and pull requests
MAX_FETCH_HAVE = 10_000  # commits of a fetch's `have` looked up; the rest only make the bundle larger


def fit_list(items: list[str], limit_bytes: int) -> list[str]:
    """``items`` in order, as many as fit in ``limit_bytes`` (UTF-8), the rest summed up in a last entry
    ("… and N more"): for a listing recorded in an event field, e.g. the paths a job's result left out."""
    tail_allowance = 64
    kept, used = [], 0
    for index, item in enumerate(items):
        size = len(item.encode())
        if used + size > limit_bytes - tail_allowance:
            return [*kept, f"… and {len(items) - index} more"]
        kept.append(item)
        used += size
    return kept
