"""``kb`` commands for the hosted repository: login, whoami, route start, routes, clone, fetch, push, pr, issue, join,
members, rules approve, token. Human output by default, ``--json`` for machines.

A clone is a normal git repository whose ``origin`` is a bundle file kept in ``.git/kb/origin.bundle``: ``kb fetch``
refreshes that file from the service and runs ``git fetch origin``; ``kb push`` bundles a local branch against what
origin last showed and streams it to the service.
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

from contracts import names
from services.cli.client import metadata, save_token
from services.ingest import pulls_cli
from services.ingest.cli_support import (
    CliError,
    add,
    all_pages,
    comment_dict,
    emit,
    git,
    git_bytes,
    group,
    handler,
    stub,
    when,
)

CHUNK_BYTES = 256 * 1024
PROGRESS_FROM_BYTES = 1024 * 1024


def progress(verb: str, done: int, total: int) -> None:
    if total >= PROGRESS_FROM_BYTES:
        end = "\n" if done >= total else ""
        print(f"\r{verb} {done / 1e6:.1f} / {total / 1e6:.1f} MB", end=end, file=sys.stderr, flush=True)


def principal_dict(p) -> dict:
    from services.common.auth import KIND_NAMES, ROLE_NAMES

    return {"name": p.name, "kind": KIND_NAMES.get(p.kind, "?"), "owner": p.owner, "role": ROLE_NAMES.get(p.role, "?")}


def describe(p) -> str:
    from contracts.access import Actor

    return Actor(p.name, p.kind, p.owner, p.role).describe()


# --- sign-in -------------------------------------------------------------------------------------------------------


@handler
def cmd_login(args):
    from kernelboard.v1 import ingest_pb2

    token = args.token or (sys.stdin.readline().strip() if not sys.stdin.isatty() else "")
    if not token:
        raise CliError("give the token: kb login --token kb_... (or on standard input)")
    me = stub().WhoAmI(ingest_pb2.WhoAmIRequest(), metadata=metadata(token))
    path = save_token(token)
    emit(args, {**principal_dict(me), "credentials": str(path)}, f"signed in as {describe(me)}; token in {path}")


@handler
def cmd_whoami(args):
    from kernelboard.v1 import ingest_pb2

    me = stub().WhoAmI(ingest_pb2.WhoAmIRequest(), metadata=metadata())
    emit(args, principal_dict(me), describe(me))


@handler
def cmd_token_create(args):
    from kernelboard.v1 import ingest_pb2

    kind = 3 if args.service else 0
    reply = stub().CreateToken(
        ingest_pb2.CreateTokenRequest(name=args.name or "", kind=kind, ttl_seconds=args.ttl, member=args.member),
        metadata=metadata(),
    )
    data = {"token": reply.token, "principal": principal_dict(reply.principal), "registered": reply.registered}
    new = " (newly registered)" if reply.registered else ""
    emit(args, data, f"token for {describe(reply.principal)}{new}, shown once:\n{reply.token}")


@handler
def cmd_token_revoke(args):
    from kernelboard.v1 import ingest_pb2

    reply = stub().RevokeToken(ingest_pb2.RevokeTokenRequest(token=args.token), metadata=metadata())
    emit(args, {"revoked": reply.principal}, f"revoked a token of {reply.principal}")


# --- routes --------------------------------------------------------------------------------------------------------


def route_dict(r) -> dict:
    return {"route": r.route, "owner": r.owner, "started_by": r.started_by, "head": r.head_sha, "base": r.base_sha}


@handler
def cmd_route_start(args):
    from kernelboard.v1 import ingest_pb2

    r = stub().StartRoute(ingest_pb2.StartRouteRequest(route=args.name), metadata=metadata())
    emit(
        args,
        route_dict(r),
        f"started route {r.route} (owner {r.owner}) at main {r.head_sha[:12]}; "
        f"`kb clone --route {r.route}` to work on it",
    )


@handler
def cmd_routes(args):
    from kernelboard.v1 import ingest_pb2

    routes = stub().ListRoutes(ingest_pb2.ListRoutesRequest(), metadata=metadata()).routes
    from services.common.text import table  # every kb table: columns as wide as their widest cell

    rows = [[r.route, r.owner, r.head_sha[:12], r.started_by] for r in routes]
    lines = table(["route", "owner", "head", "started by"], rows, indent="")
    emit(args, {"routes": [route_dict(r) for r in routes]}, "\n".join(lines))


# --- clone, fetch, push --------------------------------------------------------------------------------------------


def fetch_bundle(target: Path, have=()) -> int:
    """Write the service's bundle (main, the tag checks, every route; without what ``have`` reaches) to ``target``;
    returns its size, 0 (and nothing written) when ``have`` already reaches everything."""
    from kernelboard.v1 import ingest_pb2

    target.parent.mkdir(parents=True, exist_ok=True)
    received = 0
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as out:
        for chunk in stub().FetchStream(ingest_pb2.FetchRequest(have=list(have)), metadata=metadata()):
            out.write(chunk.data)
            received += len(chunk.data)
            progress("received", received, chunk.total_bytes)
    if received:
        os.replace(out.name, target)
    else:
        os.unlink(out.name)
    return received


@handler
def cmd_clone(args):
    dest = Path(args.dir or (f"kb-{args.route}" if args.route else "kernelboard")).resolve()
    if dest.exists() and any(dest.iterdir()):
        raise CliError(f"{dest} exists and is not empty")
    branch = names.route_branch(args.route) if args.route else "main"
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "origin.bundle"
        size = fetch_bundle(bundle)
        git("clone", "--quiet", "--branch", branch, str(bundle), str(dest))
        kept = dest / ".git" / "kb" / "origin.bundle"
        kept.parent.mkdir(parents=True)
        shutil.move(bundle, kept)
    git("remote", "set-url", "origin", str(kept), cwd=dest)
    if args.route:
        git("config", "kb.route", args.route, cwd=dest)
    emit(
        args,
        {"dir": str(dest), "branch": branch, "bytes": size},
        f"cloned into {dest} on branch {branch} ({size} bytes)",
    )


def repo_root(path: str | None) -> Path:
    root = git("rev-parse", "--show-toplevel", cwd=path or ".", check=False)
    if not root:
        raise CliError("not inside a git clone (run `kb clone` first, or pass -C DIR)")
    return Path(root)


def refresh_origin(root: Path) -> int:
    """Fetch what origin gained since the last fetch (an incremental bundle) into refs/remotes/origin/*."""
    known = git("for-each-ref", "--format=%(objectname)", "refs/remotes/origin", "refs/tags", cwd=root).split()
    kept = root / ".git" / "kb" / "origin.bundle"
    size = fetch_bundle(kept, have=sorted(set(known)))
    if size:
        git("remote", "set-url", "origin", str(kept), cwd=root)
        # No --prune: an incremental bundle leaves out the refs that did not move.
        git("fetch", "--quiet", "origin", "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*", cwd=root)
    return size


@handler
def cmd_fetch(args):
    root = repo_root(args.C)
    size = refresh_origin(root)
    human = f"fetched {size} bytes into {root} (refs/remotes/origin/*)" if size else "up to date"
    emit(args, {"dir": str(root), "bytes": size}, human)


def make_bundle(root: Path, ref: str) -> bytes:
    """The commits of ``ref`` that origin did not show at the last fetch; when origin already has them all (a tag
    moved onto a known commit), the tip commit alone."""
    code, data, err = git_bytes("bundle", "create", "--quiet", "-", ref, "--not", "--remotes=origin", cwd=root)
    if code != 0 and "empty bundle" in err:
        code, data, err = git_bytes("bundle", "create", "--quiet", "-", "-1", ref, cwd=root)
    if code != 0:
        raise CliError(f"git bundle create: {err}")
    return data


def stream_push(ref: str, bundle: bytes):
    from kernelboard.v1 import ingest_pb2

    def chunks():
        for offset in range(0, max(len(bundle), 1), CHUNK_BYTES):
            yield ingest_pb2.PushChunk(ref=ref if offset == 0 else "", data=bundle[offset : offset + CHUNK_BYTES])
            progress("sent", min(offset + CHUNK_BYTES, len(bundle)), len(bundle))

    return stub().PushStream(chunks(), metadata=metadata())


def push_ref(args, root: Path, ref: str) -> int:
    if not git("rev-parse", "--verify", "--quiet", ref, cwd=root, check=False):
        raise CliError(f"no local {ref}: push a local branch named like its hosted ref (e.g. routes/<route>)")
    bundle = make_bundle(root, ref)
    reply = stream_push(ref, bundle)
    if ref.startswith("refs/heads/"):
        git("update-ref", "refs/remotes/origin/" + ref[len("refs/heads/") :], reply.sha, cwd=root)
    data = {
        "ref": reply.ref,
        "sha": reply.sha,
        "parent": reply.parent,
        "event_id": reply.event_id,
        "bytes": len(bundle),
        "changed_paths": list(reply.changed_paths),
        "metrics_reported": reply.metrics_reported,
        "rules_approved": reply.rules_approved,
    }
    if not reply.event_id:
        human = f"{reply.ref} already at {reply.sha[:12]}: nothing to push"
    else:
        extra = (" + metrics reported" if reply.metrics_reported else "") + (
            " + rules approved" if reply.rules_approved else ""
        )
        human = (
            f"pushed {reply.ref}: {reply.parent[:12] or '(new)'} -> {reply.sha[:12]} "
            f"({len(reply.changed_paths)} paths, {len(bundle)} bytes){extra}"
        )
    route = ref.removeprefix("refs/heads/routes/") if ref.startswith("refs/heads/routes/") else ""
    if not (route and reply.event_id):
        emit(args, data, human)
        return 0
    from services.cli import checks

    return checks.after_push(args, data, human, route, reply.sha, emit)


@handler
def cmd_push(args):
    root = repo_root(args.C)
    name = args.ref
    if not name:
        route = git("config", "kb.route", cwd=root, check=False)
        name = names.route_branch(route) if route else git("symbolic-ref", "--short", "HEAD", cwd=root, check=False)
    if not name:
        raise CliError("name the ref to push (detached HEAD and no kb.route)")
    return push_ref(args, root, names.full_ref(name))


@handler
def cmd_rules_approve(args):
    """Move the tag checks (maintainers): the rules at that commit judge from now on."""
    root = repo_root(args.C)
    commit = git("rev-parse", "--verify", f"{args.commit}^{{commit}}", cwd=root)
    git("tag", "--force", "checks", commit, cwd=root)
    push_ref(args, root, "refs/tags/checks")


# --- issues and comments ------------------------------------------------------------------------------------------


def issue_dict(i) -> dict:
    return {
        "number": i.number,
        "title": i.title,
        "body": i.body,
        "author": i.author,
        "state": i.state,
        "closed_by": i.closed_by,
        "comments": i.comments,
        "opened_at": when(i.opened_at),
    }


def comment_lines(comments) -> list[str]:
    return [f"--- {c.author}, {when(c.created_at)}\n{c.body}" for c in comments]


@handler
def cmd_issue_open(args):
    from kernelboard.v1 import ingest_pb2

    i = stub().OpenIssue(ingest_pb2.OpenIssueRequest(title=args.title, body=args.body), metadata=metadata())
    emit(args, issue_dict(i), f"opened issue #{i.number}: {i.title}")


@handler
def cmd_issue_list(args):
    from kernelboard.v1 import ingest_pb2

    request = ingest_pb2.ListIssuesRequest(state=args.state or "")
    issues = all_pages(stub().ListIssues, request, "issues", args.limit)
    lines = [f"#{i.number:<5} {i.state:<7} {i.author:<18} {i.comments:>3} comments  {i.title}" for i in issues]
    emit(args, {"issues": [issue_dict(i) for i in issues]}, "\n".join(lines) or "no issues")


@handler
def cmd_issue_show(args):
    from kernelboard.v1 import ingest_pb2

    i = stub().GetIssue(ingest_pb2.GetIssueRequest(number=args.number), metadata=metadata())
    comments = all_pages(stub().ListComments, ingest_pb2.ListCommentsRequest(issue_number=args.number), "comments", 0)
    closed = f", closed by {i.closed_by}" if i.closed_by else ""
    human = [f"#{i.number} {i.title}", f"{i.state}{closed}; opened by {i.author} {when(i.opened_at)}", "", i.body]
    emit(
        args,
        {**issue_dict(i), "thread": [comment_dict(c) for c in comments]},
        "\n".join(human + comment_lines(comments)),
    )


@handler
def cmd_issue_comment(args):
    from kernelboard.v1 import ingest_pb2

    c = stub().AddComment(
        ingest_pb2.AddCommentRequest(issue_number=args.number, body=args.message), metadata=metadata()
    )
    emit(args, comment_dict(c), f"commented on issue #{args.number}")


def set_issue_state(args, rpc: str, verb: str):
    from kernelboard.v1 import ingest_pb2

    i = getattr(stub(), rpc)(ingest_pb2.SetIssueStateRequest(number=args.number), metadata=metadata())
    emit(args, issue_dict(i), f"{verb} issue #{i.number}")


@handler
def cmd_issue_close(args):
    set_issue_state(args, "CloseIssue", "closed")


@handler
def cmd_issue_reopen(args):
    set_issue_state(args, "ReopenIssue", "reopened")


# --- joining the project -------------------------------------------------------------------------------------------


def join_dict(r) -> dict:
    return {
        "id": r.id,
        "name": r.name,
        "note": r.note,
        "state": r.state,
        "decided_by": r.decided_by,
        "decision_note": r.decision_note,
        "requested_at": when(r.requested_at),
    }


@handler
def cmd_join(args):
    from kernelboard.v1 import ingest_pb2

    r = stub().RequestJoin(ingest_pb2.RequestJoinRequest(note=args.note), metadata=metadata())
    emit(args, join_dict(r), f"asked to join the project as {r.name}: a maintainer accepts or declines it")


@handler
def cmd_members_requests(args):
    from kernelboard.v1 import ingest_pb2

    request = ingest_pb2.ListJoinRequestsRequest(state=args.state)
    requests = all_pages(stub().ListJoinRequests, request, "requests", args.limit)
    lines = [f"{r.name:<20} {r.state:<9} {when(r.requested_at)}  {r.note}" for r in requests]
    emit(args, {"requests": [join_dict(r) for r in requests]}, "\n".join(lines) or f"no {args.state} join requests")


def decide(args, accept: bool):
    from kernelboard.v1 import ingest_pb2

    request = ingest_pb2.DecideJoinRequest(name=args.name, accept=accept, note=args.note)
    r = stub().DecideJoin(request, metadata=metadata())
    human = f"{r.name} is a project member now" if accept else f"declined {r.name}'s request to join"
    emit(args, join_dict(r), human)


@handler
def cmd_members_accept(args):
    decide(args, True)


@handler
def cmd_members_decline(args):
    decide(args, False)


@handler
def cmd_members_leave(args):
    from kernelboard.v1 import ingest_pb2

    me = stub().LeaveProject(ingest_pb2.LeaveProjectRequest(), metadata=metadata())
    emit(args, principal_dict(me), f"left the project: {describe(me)}")


# --- registration --------------------------------------------------------------------------------------------------


def register(subparsers) -> None:
    login = add(subparsers, "login", cmd_login, "sign in with an API token (checked with the service, then stored)")
    login.add_argument("--token", help="the token (default: read from standard input)")
    add(subparsers, "whoami", cmd_whoami, "who the stored token signs in as")

    route = group(subparsers, "route", "routes: your own line of work in the benchmark")
    start = add(
        route, "start", cmd_route_start, "start a route from main's head (yours, your agents' and maintainers')"
    )
    start.add_argument("name", help="route name: 2-40 of a-z 0-9 -")
    add(subparsers, "routes", cmd_routes, "list the routes")

    clone = add(subparsers, "clone", cmd_clone, "clone the hosted repository (main, the tag checks, every route)")
    clone.add_argument("dir", nargs="?", help="target directory (default kb-ROUTE or kernelboard)")
    clone.add_argument("--route", help="check out routes/ROUTE and remember it for kb push / kb pr open")
    fetch = add(subparsers, "fetch", cmd_fetch, "refresh origin's refs in a clone")
    fetch.add_argument("-C", metavar="DIR", help="the clone (default: the current directory)")
    push = add(subparsers, "push", cmd_push, "push a local branch to the same-named hosted ref (fast-forward only)")
    push.add_argument("ref", nargs="?", help="routes/<route>, main, ... (default: the clone's route or branch)")
    push.add_argument("-C", metavar="DIR", help="the clone (default: the current directory)")
    push.add_argument(
        "--wait", action="store_true", help="follow the pushed commit's checks to the end; exit 0 passed, 1 not"
    )

    pulls_cli.register(subparsers)

    issue = group(subparsers, "issue", "the project's issues (anyone signed in opens and comments)")
    opened_issue = add(issue, "open", cmd_issue_open, "open an issue")
    opened_issue.add_argument("--title", required=True, help="1-200 characters")
    opened_issue.add_argument("--body", default="", help="at most 20000 characters")
    issues = add(issue, "list", cmd_issue_list, "list issues, oldest first")
    issues.add_argument("--state", choices=["open", "closed"])
    issues.add_argument("--limit", type=int, default=0, help="at most this many (default: all)")
    show = add(issue, "show", cmd_issue_show, "an issue and its comments")
    show.add_argument("number", type=int)
    issue_comment = add(issue, "comment", cmd_issue_comment, "comment on an issue")
    issue_comment.add_argument("number", type=int)
    issue_comment.add_argument("-m", "--message", required=True, help="the comment")
    for name, fn, what in (("close", cmd_issue_close, "close"), ("reopen", cmd_issue_reopen, "reopen")):
        changed = add(issue, name, fn, f"{what} an issue (its author and maintainers)")
        changed.add_argument("number", type=int)

    join = add(subparsers, "join", cmd_join, "ask to join the project as a member (a maintainer decides)")
    join.add_argument("--note", default="", help="a note for the maintainers (at most 1000 characters)")
    members = group(subparsers, "members", "project members: join requests (maintainers) and leaving")
    requests = add(members, "requests", cmd_members_requests, "join requests (maintainers)")
    requests.add_argument("--state", default="pending", choices=["pending", "accepted", "declined", "all"])
    requests.add_argument("--limit", type=int, default=0, help="at most this many (default: all)")
    for name, fn, what in (("accept", cmd_members_accept, "accept"), ("decline", cmd_members_decline, "decline")):
        decided = add(members, name, fn, f"{what} a person's pending join request (maintainers)")
        decided.add_argument("name")
        decided.add_argument("--note", default="", help="a note to the person")
    add(members, "leave", cmd_members_leave, "leave the project (members): back to signed-in")

    rules = group(subparsers, "rules", "the benchmark's rules (scienceslack.json at the tag checks)")
    approve = add(rules, "approve", cmd_rules_approve, "move the tag checks to a commit on main (maintainers)")
    approve.add_argument("commit", nargs="?", default="origin/main", help="default: origin/main")
    approve.add_argument("-C", metavar="DIR", help="the clone (default: the current directory)")

    token = group(subparsers, "token", "API tokens")
    create = add(token, "create", cmd_token_create, "a token for yourself or your agent NAME (maintainers: anyone)")
    create.add_argument("name", nargs="?", help="alice, alice/agent-1, system:x (default: yourself)")
    create.add_argument("--ttl", type=int, default=0, help="lifetime in seconds (default: no expiry)")
    create.add_argument("--member", action="store_true", help="register a new person as a member (maintainers)")
    create.add_argument("--service", action="store_true", help="a service identity (maintainers)")
    revoke = add(token, "revoke", cmd_token_revoke, "revoke a token (yours, your agents', or any for maintainers)")
    revoke.add_argument("token")
