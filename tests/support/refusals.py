"""A pure function's refusal, checked: the contracts.refusals.Refusal it raises, its status, reason and words."""

import pytest

from contracts.refusals import Refusal


def refused(fn, *args, code=None, reason=None, match=None) -> Refusal:
    """``fn(*args)`` raised a Refusal with this status code, reason and fragment of its message; returns it."""
    with pytest.raises(Refusal) as info:
        fn(*args)
    if code:
        assert info.value.code == code
    if reason:
        assert info.value.reason == reason
    if match:
        assert match in info.value.message, info.value.message
    return info.value
