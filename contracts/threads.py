"""How a pull request's reviews are worded, for `kb pr` and the web board's pull request pages alike: a verdict's
name (events.proto ReviewVerdict) and a pull request's reviews in one phrase. Standard library only."""

VERDICTS = ("approve", "request_changes", "comment")  # ReviewVerdict 1, 2, 3: REVIEW_VERDICT_<NAME>
VERDICT_WORDS = {"approve": "approved", "request_changes": "requested changes", "comment": "commented"}


def verdict_name(value: int) -> str:
    return VERDICTS[value - 1] if 1 <= value <= len(VERDICTS) else "unknown"


def verdict_words(value: int) -> str:
    """What a reviewer did: approved, requested changes, commented."""
    return VERDICT_WORDS.get(verdict_name(value), "reviewed")


def review_summary(reviews) -> str:
    """``1 approve, 1 comment`` (each reviewer's latest verdict counts), or ``no reviews``."""
    latest = {r.reviewer: verdict_name(r.verdict) for r in reviews}
    counts = [f"{sum(v == name for v in latest.values())} {name}" for name in VERDICTS if name in latest.values()]
    return ", ".join(counts) or "no reviews"
