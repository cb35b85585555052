"""Who may do what, decided once: every permission is a pure function of (actor, action, target), and a denial is a
PERMISSION_DENIED Refusal that names the reason (docs/ARCHITECTURE.md, "Access").

The principles, from the benchmark's page:
- Roles are ordered: signed-in < member < maintainer. An agent acts for its owner, with its owner's role, on routes,
  pull requests and jobs.
- Agents and service identities never write main, never merge, never approve the rules: those are a maintainer's own
  acts, in person. Approving the rules (moving the tag ``checks``) is for the maintainers the rules in force name, so
  a maintainer role given through host access (``kb admin``) does not approve them, and neither does an operator.
- Tokens are a person's act: a person creates tokens for itself and its agents, a maintainer for anyone; an agent's
  token never mints its owner's.

This module imports the standard library, the generated protos (for the role and kind numbers) and contracts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from kernelboard.v1 import events_pb2

from contracts import names
from contracts.refusals import Refusal, denied

PERSON, AGENT, SERVICE = (
    events_pb2.PRINCIPAL_KIND_PERSON,
    events_pb2.PRINCIPAL_KIND_AGENT,
    events_pb2.PRINCIPAL_KIND_SERVICE,
)
SIGNED_IN, MEMBER, MAINTAINER = events_pb2.ROLE_SIGNED_IN, events_pb2.ROLE_MEMBER, events_pb2.ROLE_MAINTAINER
ROLE_NAMES = {SIGNED_IN: "signed-in", MEMBER: "member", MAINTAINER: "maintainer"}
KIND_NAMES = {PERSON: "person", AGENT: "agent", SERVICE: "service"}


@dataclass(frozen=True)
class Actor:
    """Who asks. ``kind`` and ``role`` are the protos' numbers (services.common.auth.Principal has the same four
    fields); an agent's role is its owner's. ``via_host``: an operator acting through host access (``kb admin``, the
    database directly), not a principal signed in to a service."""

    name: str
    kind: int
    owner: str  # the person it acts for; itself for a person or a service
    role: int
    via_host: bool = False

    @classmethod
    def of(cls, principal) -> Actor:
        """The actor of a signed-in principal (anything with name, kind, owner and role)."""
        return cls(principal.name, principal.kind, principal.owner or principal.name, principal.role)

    @classmethod
    def operator(cls, name: str) -> Actor:
        return cls(name, events_pb2.PRINCIPAL_KIND_UNSPECIFIED, name, events_pb2.ROLE_UNSPECIFIED, via_host=True)

    @property
    def is_maintainer(self) -> bool:
        """The maintainer role, in person or through an agent (an operator on the host has no role)."""
        return self.role == MAINTAINER and not self.via_host

    @property
    def is_member(self) -> bool:
        """A project member or more (a maintainer is a member too)."""
        return self.role >= MEMBER

    @property
    def in_person(self) -> bool:
        return self.kind == PERSON and not self.via_host

    @property
    def role_name(self) -> str:
        return ROLE_NAMES.get(self.role, "no role")

    def describe(self) -> str:
        """``alice/bot (agent of alice, member)``, ``alice (member)`` or ``operator:root (operator on the host)``."""
        if self.via_host:
            return f"{self.name} (operator on the host)"
        if self.kind == AGENT:
            return f"{self.name} (agent of {self.owner}, {self.role_name})"
        return f"{self.name} ({self.role_name})"

    def _what(self) -> str:
        """What this actor is, for a denial of an act that is a maintainer's own."""
        if self.via_host:
            return "an operator acting through host access"
        if self.kind == AGENT:
            return f"an agent acting for {self.owner}"
        if self.kind == SERVICE:
            return "a service identity"
        return "not a person"


@dataclass(frozen=True)
class Target:
    """What an action is done to, as far as a permission depends on it.

    owner: the person the route, pull request, job or token belongs to (for a new token: the person the principal
    will act for; itself for a person or a service). label: how messages name the target ("route 'fast'").
    name: the principal a token is for. member: the token registers a member. maintainers: for approving the rules,
    the maintainers the rules in force name; None when no rules are in force yet (the first approval, at seeding).
    """

    owner: str = ""
    label: str = ""
    name: str = ""
    member: bool = False
    maintainers: tuple[str, ...] | None = None


class Action(Enum):
    """Every action a permission guards; the value is how messages say it."""

    WRITE_MAIN = "write main"
    APPROVE_RULES = "approve the rules (move the tag checks)"
    WRITE_ROUTE = "write a route"
    WRITE_PULL_REF = "write refs/pull/<n>/head by a push"
    WRITE_JOB_REF = "write refs/jobs/<id>"
    START_ROUTE = "start a route"
    OPEN_PULL = "open a pull request"
    REVIEW_PULL = "review a pull request"
    APPROVE_PULL = "approve or request changes on a pull request"
    MERGE_PULL = "merge a pull request"
    SUBMIT_JOB = "submit a job"
    CANCEL_JOB = "cancel a job"
    RELEASE_JOB = "release a job"
    READ_THREADS = "read issues, pull requests, reviews and comments"
    OPEN_ISSUE = "open an issue"
    COMMENT = "comment on an issue or pull request"
    CLOSE_ISSUE = "close or reopen an issue"
    REQUEST_JOIN = "ask to join the project"
    DECIDE_JOIN = "see and decide join requests"
    LEAVE = "leave the project"
    CREATE_TOKEN = "create a token"
    REVOKE_TOKEN = "revoke a token"
    SET_STATUS = "set a board's status"
    ADOPT_ROUTE = "mark a route adopted"
    REBUILD = "rebuild the board"
    DISQUALIFY = "disqualify or reinstate a check's result"


# --- the rules -----------------------------------------------------------------------------------------------------


def _role(actor: Actor, role: int, action: Action | str) -> Refusal | None:
    """The role check: "maintainer role needed to <action>; alice (member) is not"."""
    doing = action.value if isinstance(action, Action) else action
    if actor.via_host or actor.role < role:
        return denied(f"{ROLE_NAMES[role]} role needed to {doing}; {actor.describe()} is not", "role")
    return None


def _maintainer_in_person(actor: Actor, action: Action, _target: Target) -> Refusal | None:
    """Writing main and merging: a maintainer, in person."""
    if refusal := _role(actor, MAINTAINER, action):
        return refusal
    if not actor.in_person:
        return denied(
            f"only a maintainer in person may {action.value}; {actor.name} is {actor._what()}", "not_in_person"
        )
    return None


def _approve_rules(actor: Actor, action: Action, target: Target) -> Refusal | None:
    if refusal := _maintainer_in_person(actor, action, target):
        return refusal
    if target.maintainers is not None and actor.name not in target.maintainers:
        named = ", ".join(target.maintainers) or "nobody"
        return denied(
            f"only the maintainers named in the rules in force ({named}) {action.value}; {actor.name} is not named "
            "there (a maintainer role given on the host does not approve rules)",
            "not_named_maintainer",
        )
    return None


def _owner_or_maintainer(actor: Actor, action: Action, target: Target) -> Refusal | None:
    """Routes, their pull requests and jobs: the owner, the owner's agents, and maintainers (and their agents)."""
    if not actor.via_host and (actor.is_maintainer or actor.owner == target.owner):
        return None
    return denied(f"{target.label or 'it'} belongs to {target.owner}; {actor.name} may not {action.value}", "owner")


def _scheduler_only(actor: Actor, action: Action, _target: Target) -> Refusal | None:
    if actor.kind == SERVICE and actor.name == names.SCHEDULER and not actor.via_host:
        return None
    return denied(f"only {names.SCHEDULER} may {action.value} ({actor.name} may not)", "scheduler_only")


def _never_by_push(actor: Actor, action: Action, _target: Target) -> Refusal | None:
    return denied(f"nobody may {action.value}: OpenPullRequest writes it", "not_by_push")


def _signed_in(actor: Actor, action: Action, _target: Target) -> Refusal | None:
    if actor.via_host:
        return denied(f"an operator on the host does not {action.value}: sign in as a person", "via_host")
    return None


def _speaks_for_a_person(actor: Actor, action: Action, target: Target) -> Refusal | None:
    """Writing to the project's conversation: people and their agents. A service identity speaks for nobody: the web
    board's (system:web) reads issues and pull requests to show them publicly, and writes none."""
    if refusal := _signed_in(actor, action, target):
        return refusal
    if actor.kind == SERVICE:
        return denied(f"a service identity does not {action.value} ({actor.name} speaks for nobody)", "service")
    return None


def _maintainer_role(actor: Actor, action: Action, _target: Target) -> Refusal | None:
    return _role(actor, MAINTAINER, action)


def _not_the_authors(actor: Actor, action: Action, target: Target) -> Refusal | None:
    """A verdict on a pull request: anyone signed in but its author's side -- the author, the person it acts for and
    that person's agents -- who may comment on it. A maintainer's own pull request waits for another's approval."""
    if refusal := _speaks_for_a_person(actor, action, target):
        return refusal
    if actor.owner == target.owner:
        return denied(
            f"{actor.name} may not {action.value} of its own side: {target.label or 'it'} is by {target.name}, who "
            f"acts for {target.owner} (a comment is welcome)",
            "own_pull",
        )
    return None


def _author_or_maintainer(actor: Actor, action: Action, target: Target) -> Refusal | None:
    """An issue: its author, the person the author acts for (and that person's agents), maintainers."""
    if not actor.via_host and (actor.is_maintainer or actor.name == target.name or actor.owner == target.owner):
        return None
    return denied(
        f"only the author of {target.label or 'it'} ({target.name}), the person it acts for and maintainers may "
        f"{action.value}; {actor.name} may not",
        "owner",
    )


def _ask_to_join(actor: Actor, action: Action, _target: Target) -> Refusal | None:
    """People ask to join: an agent takes its owner's role, and a service has none to gain."""
    if actor.in_person:
        return None
    return denied(f"people ask to join, not agents or services ({actor.name}); ask as {actor.owner}", "not_in_person")


def _leave(actor: Actor, action: Action, _target: Target) -> Refusal | None:
    if actor.in_person:
        return None
    return denied(f"people leave the project, not agents or services ({actor.name})", "not_in_person")


def _create_token(actor: Actor, action: Action, target: Target) -> Refusal | None:
    if actor.via_host:
        return None  # the operator holds the database: `kb admin token issue`
    if actor.is_maintainer and actor.in_person:
        return None
    if target.member:
        return _role(actor, MAINTAINER, "register a member") or denied(
            f"only a maintainer in person may register a member; {actor.name} is {actor._what()}", "not_in_person"
        )
    if not actor.in_person:
        return denied(f"only people create tokens; {actor.name} is {actor._what()}", "not_in_person")
    if target.owner == actor.name:
        return None
    return denied(
        f"{actor.name} may create tokens only for itself and its agents ({actor.name}/<agent>), not "
        f"{target.name or target.owner}",
        "owner",
    )


def _revoke_token(actor: Actor, action: Action, target: Target) -> Refusal | None:
    if actor.via_host or (actor.is_maintainer and actor.in_person) or target.name == actor.name:
        return None
    if actor.in_person and target.owner == actor.name:
        return None
    # Whose token it is stays unsaid: a caller must not learn the holder of a token it may not revoke.
    return denied(f"{actor.name} may not revoke this token: only its holder, its person or a maintainer may", "owner")


@dataclass(frozen=True)
class Rule:
    who: str  # the rule in words, for the docs
    decide: Callable[[Actor, Action, Target], Refusal | None]


RULES: dict[Action, Rule] = {
    Action.WRITE_MAIN: Rule("a maintainer in person", _maintainer_in_person),
    Action.APPROVE_RULES: Rule(
        "a maintainer in person, named in the rules in force (any maintainer for the first rules)", _approve_rules
    ),
    Action.WRITE_ROUTE: Rule("the route's owner, the owner's agents, maintainers", _owner_or_maintainer),
    Action.WRITE_PULL_REF: Rule("nobody (OpenPullRequest writes it)", _never_by_push),
    Action.WRITE_JOB_REF: Rule(f"{names.SCHEDULER} only", _scheduler_only),
    Action.START_ROUTE: Rule("anyone signed in (the route belongs to the person it acts for)", _signed_in),
    Action.OPEN_PULL: Rule("the route's owner, the owner's agents, maintainers", _owner_or_maintainer),
    Action.REVIEW_PULL: Rule("people and agents signed in", _speaks_for_a_person),
    Action.APPROVE_PULL: Rule(
        "people and agents signed in but the pull request's author, the person it acts for and that person's agents",
        _not_the_authors,
    ),
    Action.MERGE_PULL: Rule("a maintainer in person", _maintainer_in_person),
    Action.SUBMIT_JOB: Rule("the route's owner, the owner's agents, maintainers", _owner_or_maintainer),
    Action.CANCEL_JOB: Rule("the job's owner, the owner's agents, maintainers", _owner_or_maintainer),
    Action.RELEASE_JOB: Rule("the maintainer role (an agent of a maintainer too)", _maintainer_role),
    Action.READ_THREADS: Rule(
        f"anyone signed in, {names.WEB} included (the web board shows them publicly)", _signed_in
    ),
    Action.OPEN_ISSUE: Rule("people and agents signed in", _speaks_for_a_person),
    Action.COMMENT: Rule("people and agents signed in", _speaks_for_a_person),
    Action.CLOSE_ISSUE: Rule(
        "the issue's author, the person it acts for and that person's agents, maintainers", _author_or_maintainer
    ),
    Action.REQUEST_JOIN: Rule("people, in person", _ask_to_join),
    Action.DECIDE_JOIN: Rule("the maintainer role", _maintainer_role),
    Action.LEAVE: Rule("people, in person (a member; maintainers leave by a rules change)", _leave),
    Action.CREATE_TOKEN: Rule(
        "a person for itself and its agents; a maintainer in person for anyone, and only they register members; "
        "an operator on the host",
        _create_token,
    ),
    Action.REVOKE_TOKEN: Rule(
        "the token's holder; a person for its agents; a maintainer in person; an operator on the host", _revoke_token
    ),
    Action.SET_STATUS: Rule("the maintainer role", _maintainer_role),
    Action.ADOPT_ROUTE: Rule("the maintainer role", _maintainer_role),
    Action.REBUILD: Rule("the maintainer role", _maintainer_role),
    Action.DISQUALIFY: Rule("a maintainer in person", _maintainer_in_person),
}


def decide(actor: Actor, action: Action, target: Target = Target()) -> Refusal | None:
    """None when ``actor`` may do ``action`` to ``target``; else the PERMISSION_DENIED Refusal saying why."""
    return RULES[action].decide(actor, action, target)


def require(actor: Actor, action: Action, target: Target = Target()) -> Actor:
    """``actor`` when allowed; else raise the Refusal (the gRPC interceptor answers PERMISSION_DENIED with it)."""
    refusal = decide(actor, action, target)
    if refusal is not None:
        raise refusal
    return actor


WRITE_ACTIONS = {
    "main": Action.WRITE_MAIN,
    "checks": Action.APPROVE_RULES,
    "route": Action.WRITE_ROUTE,
    "pull": Action.WRITE_PULL_REF,
    "job": Action.WRITE_JOB_REF,
}


def write_action(ref_kind: str) -> Action:
    """The action writing a ref of this kind (contracts.names.Ref.kind) is."""
    return WRITE_ACTIONS[ref_kind]


def held(actor: Actor) -> bool:
    """A job waits held (JobHeldAdmin) for a maintainer's release unless its submitter is a member or more."""
    return actor.role < MEMBER


def is_role(role: object) -> bool:
    """Whether ``role`` is one a person or a service may be given (signed-in, member or maintainer)."""
    return role in ROLE_NAMES


def has_role_of_its_own(role: int | None) -> bool:
    """Whether a role was given; an agent must have none (it takes its owner's)."""
    return role not in (events_pb2.ROLE_UNSPECIFIED, None)


def registered_as(principal, kind: int, owner: str, role: int | None) -> bool:
    """Whether a stored principal (name, kind, owner, role) is the one asked for; an agent's role is its owner's,
    so only its kind and owner count."""
    if kind == AGENT:
        return (principal.kind, principal.owner) == (kind, owner)
    return (principal.kind, principal.owner, principal.role) == (kind, owner, role)


def owner_of(actor: Actor) -> str:
    """The person a principal acts for (routes and tokens it creates belong to them)."""
    return actor.owner or actor.name


# --- the table in docs/ARCHITECTURE.md, computed from the rules above ----------------------------------------------

PROFILES: tuple[tuple[str, Actor], ...] = (
    ("outsider", Actor("olga", PERSON, "olga", SIGNED_IN)),
    ("member", Actor("mia", PERSON, "mia", MEMBER)),
    ("maintainer", Actor("max", PERSON, "max", MAINTAINER)),
    ("agent of a member", Actor("mia/bot", AGENT, "mia", MEMBER)),
    ("agent of a maintainer", Actor("max/bot", AGENT, "max", MAINTAINER)),
    (names.SCHEDULER, Actor(names.SCHEDULER, SERVICE, names.SCHEDULER, SIGNED_IN)),
    (names.WEB, Actor(names.WEB, SERVICE, names.WEB, SIGNED_IN)),
    ("operator (host)", Actor.operator(names.operator("root"))),
)


def _targets(actor: Actor) -> tuple[Target, Target]:
    """Its own target (its owner's route, job or token; rules naming it) and someone else's."""
    own = Target(owner=actor.owner, name=actor.name, maintainers=(actor.owner,))
    other = Target(owner="someone", name="someone", maintainers=("someone",))
    return own, other


def cell(actor: Actor, action: Action) -> str:
    """``yes`` (any target), ``own`` (its own or its owner's only; for the rules: when they name it), ``not own``
    (anyone's but its own or its owner's) or ``no``."""
    own, other = _targets(actor)
    on_own, on_other = decide(actor, action, own) is None, decide(actor, action, other) is None
    if on_other:
        return "yes" if on_own else "not own"
    return "own" if on_own else "no"


def table() -> str:
    """The access table as Markdown: one row per action, one column per kind of actor."""
    header = ["action", *(label for label, _ in PROFILES), "rule"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for action, rule in RULES.items():
        cells = [cell(actor, action) for _, actor in PROFILES]
        lines.append("| " + " | ".join([action.value, *cells, rule.who]) + " |")
    return "\n".join(lines)
