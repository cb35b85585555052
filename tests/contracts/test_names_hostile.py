"""Property tests of every identifier grammar in contracts.names against hostile input (issue 12): what a grammar
accepts is bounded, printable and matched in full; a trailing newline or any control character is refused; a refusal
is INVALID_ARGUMENT and quotes only a short prefix, however long the input."""

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernelboard.v1 import events_pb2

from contracts import names
from contracts.refusals import Refusal
from contracts.refusals import clip as clip_of

GRAMMARS = [
    names.ROUTE,
    names.PERSON,
    names.AGENT,
    names.SERVICE,
    names.JOB_ID,
    names.PROBLEM,
    names.OBJECT_ID,
    names.TOKEN,
    names.TOKEN_HASH,
]
SMUGGLED = ["\n", "\r", "\x00", "\t", " ", "\x7f", "\u202e", "\u2028", "\u00a0", ";"]
anything = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=50),
    st.integers(),
    st.none(),
    st.builds(lambda c, n: c * n, st.sampled_from(["a", "1", "\n"]), st.integers(0, 300_000)),
)
PROPERTY = settings(max_examples=200, deadline=None)


def printable(value: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") or c.isspace() for c in value)


def refusal(check, value) -> Refusal:
    with pytest.raises(Refusal) as info:
        check(value)
    assert info.value.code == "INVALID_ARGUMENT"
    assert len(info.value.message) < 400, "the message echoes the input"
    return info.value


@pytest.mark.parametrize("grammar", GRAMMARS, ids=lambda g: g.kind)
@PROPERTY
@given(data=st.data())
def test_each_grammar_accepts_bounded_printable_names_only(grammar, data):
    value = data.draw(anything)
    if grammar.matches(value):
        assert isinstance(value, str) and len(value) <= grammar.max_chars and printable(value)
        assert grammar.check(value) == value
    else:
        refusal(grammar.check, value)


@pytest.mark.parametrize("grammar", GRAMMARS, ids=lambda g: g.kind)
@PROPERTY
@given(data=st.data())
def test_a_well_formed_name_with_anything_smuggled_in_is_refused(grammar, data):
    name = data.draw(st.from_regex(grammar.pattern, fullmatch=True).filter(lambda v: len(v) <= grammar.max_chars))
    assert grammar.matches(name)
    smuggled = data.draw(st.sampled_from(SMUGGLED))
    where = data.draw(st.sampled_from(["end", "start", "middle"]))
    bad = {"end": name + smuggled, "start": smuggled + name, "middle": name[:1] + smuggled + name[1:]}[where]
    refusal(grammar.check, bad)


@PROPERTY
@given(data=st.data())
def test_refs_parse_in_full(data):
    route = data.draw(st.from_regex(names.ROUTE.pattern, fullmatch=True))
    job = data.draw(st.from_regex(names.JOB_ID.pattern, fullmatch=True))
    number = data.draw(st.integers(1, names.PULL_NUMBER_MAX))
    assert names.ref(names.route_ref(route)).route == route
    assert names.ref(names.job_ref(job)).job_id == job
    assert names.ref(names.pull_ref(number)).pull_number == number
    for good in (names.route_ref(route), names.job_ref(job), names.pull_ref(number), names.MAIN_REF):
        smuggled = data.draw(st.sampled_from(SMUGGLED))
        refusal(names.ref, good + smuggled)
    refusal(names.ref, names.ROUTE_PREFIX + "a" * data.draw(st.integers(41, 300_000)))
    value = data.draw(anything)
    if names.is_ref(value):
        assert printable(value) and len(value) <= names.REF_MAX_CHARS
    else:
        refusal(names.ref, value)


@PROPERTY
@given(value=anything)
def test_streams_and_principals(value):
    for check in (names.stream, names.principal):
        try:
            accepted = check(value)
        except Refusal as refused:
            assert refused.code == "INVALID_ARGUMENT" and len(refused.message) < 400
        else:
            assert isinstance(accepted, str) and printable(accepted) and len(accepted) <= names.STREAM_MAX_CHARS


@PROPERTY
@given(value=st.one_of(st.integers(), st.booleans(), st.floats(), st.text(max_size=12)))
def test_pull_numbers(value):
    valid = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= names.PULL_NUMBER_MAX
    if valid:
        assert names.pull_number(value) == value
    else:
        refusal(names.pull_number, value)


@PROPERTY
@given(value=st.text(max_size=400), multiline=st.booleans())
def test_free_text_is_bounded_and_has_no_control_characters(value, multiline):
    try:
        accepted = names.text(value, "note", 200, multiline=multiline)
    except Refusal as refused:
        assert refused.code == "INVALID_ARGUMENT" and len(refused.message) < 400
    else:
        allowed = "\n\t" if multiline else ""
        assert len(accepted) <= 200
        assert not any(unicodedata.category(c) == "Cc" and c not in allowed for c in accepted)


def test_a_ref_parses_once_from_its_short_or_full_form():
    """The short forms a person types (main, checks, routes/<r>, jobs/<id>) name the same refs as the full names, with
    the one grammar: a job id is a Slurm id, a pull number bounded, a route name the route grammar."""
    short = lambda value: names.ref(value, short_forms=True)  # noqa: E731
    assert short("main") == names.ref("refs/heads/main") and short("checks").kind == "checks"
    route = short("routes/fast")
    assert (route.name, route.route, route.stream, route.commit_kind) == (
        "refs/heads/routes/fast",
        "fast",
        "route:fast",
        events_pb2.COMMIT_KIND_ROUTE,
    )
    job = short("jobs/17")
    assert (job.name, job.job_id, job.stream) == ("refs/jobs/17", "17", "job:17")
    pull = short("refs/pull/3/head")
    assert (pull.pull_number, pull.stream) == (3, "pull:3")
    for bad in ("refs/heads/feature", "routes/Bad_Name", "refs/jobs/../x", "jobs/abc", "refs/pull/99999999999/head"):
        refused = refusal(short, bad)
        assert refused.reason == "bad_ref" and clip_of(bad) in refused.message
    with pytest.raises(Refusal):
        names.ref("routes/fast")  # a short form only where asked for
