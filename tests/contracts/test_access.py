"""contracts.access: the principles of the benchmark's page hold for every actor and target, and the table in
docs/ARCHITECTURE.md is the one the module computes."""

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from contracts import access, names
from contracts.access import AGENT, MAINTAINER, MEMBER, PERSON, SERVICE, SIGNED_IN, Action, Actor, Target

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md"
MAINTAINERS_OWN_ACTS = (Action.WRITE_MAIN, Action.MERGE_PULL, Action.APPROVE_RULES, Action.DISQUALIFY)

person_names = st.sampled_from(["alice", "bob", "curator", "max"])
roles = st.sampled_from([0, SIGNED_IN, MEMBER, MAINTAINER])
targets = st.builds(
    Target,
    owner=person_names,
    name=st.one_of(person_names, person_names.map(lambda p: f"{p}/bot")),
    member=st.booleans(),
    maintainers=st.one_of(st.none(), st.tuples(person_names), st.tuples(person_names, person_names)),
)


@st.composite
def not_in_person(draw) -> Actor:
    """Agents (with any role of their owner), service identities (any role) and operators on the host."""
    owner = draw(person_names)
    return draw(
        st.sampled_from(
            [
                Actor(f"{owner}/bot", AGENT, owner, draw(roles)),
                Actor(draw(st.sampled_from([names.SCHEDULER, "system:x"])), SERVICE, "system:x", draw(roles)),
                Actor.operator(f"operator:{owner}"),
            ]
        )
    )


@given(not_in_person(), st.sampled_from(MAINTAINERS_OWN_ACTS), targets)
def test_agents_services_and_operators_never_write_main_merge_or_approve_rules(actor, action, target):
    refusal = access.decide(actor, action, target)
    assert refusal is not None and refusal.code == "PERMISSION_DENIED"


@given(person_names, roles, targets)
def test_only_a_named_maintainer_approves_rules(name, role, target):
    allowed = access.decide(Actor(name, PERSON, name, role), Action.APPROVE_RULES, target) is None
    named = target.maintainers is None or name in target.maintainers
    assert allowed == (role == MAINTAINER and named)


@given(not_in_person(), targets)
def test_no_agent_or_service_mints_tokens(actor, target):
    if not actor.via_host:
        assert access.decide(actor, Action.CREATE_TOKEN, target) is not None


@given(person_names, roles, st.booleans(), targets)
def test_nobody_approves_a_pull_request_of_their_own_side(person, role, as_agent, target):
    """The author, the person the author acts for and that person's agents never approve (or request changes on) the
    pull request, whatever their role; anyone else signed in does."""
    actor = Actor(f"{person}/bot", AGENT, person, role) if as_agent else Actor(person, PERSON, person, role)
    refusal = access.decide(actor, Action.APPROVE_PULL, target)
    if person == target.owner:
        assert refusal is not None and refusal.reason == "own_pull" and actor.name in refusal.message
    else:
        assert refusal is None
    assert access.decide(Actor.operator(f"operator:{person}"), Action.APPROVE_PULL, target) is not None


def test_an_agent_acts_for_its_owner_on_routes_pull_requests_and_jobs():
    agent = Actor("alice/bot", AGENT, "alice", MEMBER)
    for action in (Action.WRITE_ROUTE, Action.OPEN_PULL, Action.SUBMIT_JOB, Action.CANCEL_JOB):
        assert access.decide(agent, action, Target(owner="alice")) is None
        refusal = access.decide(agent, action, Target(owner="bob", label="route 'fast'"))
        assert refusal.code == "PERMISSION_DENIED" and refusal.message.startswith("route 'fast' belongs to bob")


def test_denials_name_the_reason():
    agent = Actor("curator/bot", AGENT, "curator", MAINTAINER)
    refusal = access.decide(agent, Action.WRITE_MAIN)
    assert refusal.reason == "not_in_person"
    assert refusal.message == "only a maintainer in person may write main; curator/bot is an agent acting for curator"
    member = Actor("mia", PERSON, "mia", MEMBER)
    assert (
        access.decide(member, Action.REBUILD).message
        == "maintainer role needed to rebuild the board; mia (member) is not"
    )
    host_made = Actor("eve", PERSON, "eve", MAINTAINER)
    refusal = access.decide(host_made, Action.APPROVE_RULES, Target(maintainers=("curator",)))
    assert refusal.reason == "not_named_maintainer" and "(curator)" in refusal.message


def test_every_action_has_a_rule_and_a_row():
    assert set(access.RULES) == set(Action)
    assert len(access.table().splitlines()) == 2 + len(Action)


def test_the_architecture_table_is_the_modules():
    text = ARCHITECTURE.read_text()
    start = text.index("<!-- access table: generated")
    start = text.index("\n", start) + 1
    end = text.index("<!-- end of access table -->")
    assert text[start:end].strip() == access.table(), (
        "docs/ARCHITECTURE.md's access table differs from contracts.access: paste the output of "
        "`python -c 'from contracts import access; print(access.table())'` between its markers"
    )


def test_the_web_board_reads_issues_and_pull_requests_and_writes_nothing_to_them():
    web = Actor(names.WEB, SERVICE, names.WEB, SIGNED_IN)
    assert access.decide(web, Action.READ_THREADS) is None
    for action in (Action.OPEN_ISSUE, Action.COMMENT, Action.REVIEW_PULL, Action.APPROVE_PULL):
        refusal = access.decide(web, action, Target(owner="alice", name="alice"))
        assert refusal is not None and refusal.reason == "service", action
    assert access.decide(Actor.operator("operator:root"), Action.READ_THREADS) is not None  # sign in to read
