"""``kb pr``: pull requests from a route into main -- open (with a body), show (its files, reviews and checks), list,
review, comment, merge. Human output by default, ``--json`` for machines; a review's verdict is worded the same in
both (approve, request_changes, comment).

A pull request's checks are the verifier's checks of its head commit (a route commit, checked when it was pushed).
"""

from contracts.threads import VERDICTS, review_summary, verdict_name
from services.cli import checks as kb_checks
from services.cli.client import channel, metadata
from services.common import text
from services.ingest.cli_support import CliError, add, all_pages, comment_dict, emit, git, group, handler, stub, when


def review_dict(r) -> dict:
    return {"reviewer": r.reviewer, "verdict": verdict_name(r.verdict), "body": r.body, "at": when(r.reviewed_at)}


def pull_dict(p) -> dict:
    data = {
        "number": p.number,
        "route": p.route,
        "title": p.title,
        "body": p.body,
        "author": p.author,
        "state": p.state,
        "head": p.head_sha,
        "merge_sha": p.merge_sha,
        "merged_by": p.merged_by,
        "opened_at": when(p.opened_at),
        "reviews": [review_dict(r) for r in p.reviews],
    }
    if p.files:
        data["files"] = [{"path": f.path, "added": f.added, "deleted": f.deleted, "binary": f.binary} for f in p.files]
    return data


def table(rows: list[list[str]]) -> list[str]:
    """Rows as aligned columns (services/common/text.py, as every kb table)."""
    return text.table(None, rows, indent="")


def pull_lines(pulls) -> list[str]:
    return table([[f"#{p.number}", p.state, p.route, p.author, review_summary(p.reviews), p.title] for p in pulls])


def head_checks(sha: str) -> tuple[list, str]:
    """The verifier's checks of ``sha``, or none and why they could not be read (the pull request shows anyway)."""
    import grpc
    from kernelboard.v1 import verifier_pb2, verifier_pb2_grpc

    verifier = verifier_pb2_grpc.VerifierStub(channel("verifier"))
    try:
        reply = verifier.ListChecks(verifier_pb2.ListChecksRequest(sha=sha), metadata=metadata(), timeout=10)
    except grpc.RpcError as err:
        return [], f"{err.code().name}: {err.details()}"
    return list(reply.checks), ""


def show_text(p, checks, unavailable: str) -> str:
    lines = [f"#{p.number} {p.title}  [{p.state}]"]
    lines.append(f"route {p.route} by {p.author}, opened {when(p.opened_at)}, head {p.head_sha[:12]}")
    if p.merge_sha:
        lines.append(f"merged by {p.merged_by} as {p.merge_sha[:12]}")
    if p.body:
        lines += ["", p.body]
    added, deleted = sum(f.added for f in p.files), sum(f.deleted for f in p.files)
    lines += ["", f"files: {len(p.files)} changed, +{added} -{deleted}"]
    lines += [
        "  " + row
        for row in table([[f.path, "binary" if f.binary else f"+{f.added} -{f.deleted}", ""] for f in p.files])
    ]
    lines += ["", f"reviews: {review_summary(p.reviews)}"]
    for r in p.reviews:
        lines.append(f"  {r.reviewer}  {verdict_name(r.verdict)}  {when(r.reviewed_at)}")
        lines += [f"    {line}" for line in r.body.splitlines()]
    if unavailable:
        lines += ["", f"checks: not available ({unavailable})"]
    else:
        lines += ["", f"checks of {p.head_sha[:12]}: {len(checks) or 'none yet'}"]
    lines += ["  " + row for row in kb_checks.rows(checks)] if checks else []  # worded by contracts/results.py
    return "\n".join(lines)


@handler
def cmd_pr_open(args):
    from kernelboard.v1 import ingest_pb2

    route = args.route or git("config", "kb.route", cwd=args.C or ".", check=False)
    if not route:
        raise CliError("name the route: kb pr open --route NAME")
    request = ingest_pb2.OpenPullRequestRequest(route=route, title=args.title, body=args.body)
    p = stub().OpenPullRequest(request, metadata=metadata())
    emit(args, pull_dict(p), f"opened pull request #{p.number} from route {p.route} ({p.head_sha[:12]})")


@handler
def cmd_pr_show(args):
    from google.protobuf import json_format
    from kernelboard.v1 import ingest_pb2

    p = stub().GetPullRequest(ingest_pb2.GetPullRequestRequest(number=args.number), metadata=metadata())
    checks, unavailable = head_checks(p.head_sha)
    data = {**pull_dict(p), "checks": [json_format.MessageToDict(c, preserving_proto_field_name=True) for c in checks]}
    if unavailable:
        data["checks_unavailable"] = unavailable
    emit(args, data, show_text(p, checks, unavailable))


@handler
def cmd_pr_review(args):
    from kernelboard.v1 import events_pb2, ingest_pb2

    verdict = events_pb2.ReviewVerdict.Value(f"REVIEW_VERDICT_{args.verdict.upper()}")
    request = ingest_pb2.ReviewRequest(number=args.number, verdict=verdict, body=args.message)
    p = stub().Review(request, metadata=metadata())
    emit(args, pull_dict(p), f"reviewed #{p.number}: {args.verdict} ({review_summary(p.reviews)})")


@handler
def cmd_pr_merge(args):
    from kernelboard.v1 import ingest_pb2

    p = stub().Merge(ingest_pb2.MergeRequest(number=args.number), metadata=metadata())
    emit(args, pull_dict(p), f"merged #{p.number} into main as {p.merge_sha[:12]}")


@handler
def cmd_pr_list(args):
    from kernelboard.v1 import ingest_pb2

    request = ingest_pb2.ListPullRequestsRequest(route=args.route or "", state=args.state or "")
    pulls = stub().ListPullRequests(request, metadata=metadata()).pull_requests
    emit(args, {"pull_requests": [pull_dict(p) for p in pulls]}, "\n".join(pull_lines(pulls)) or "none")


@handler
def cmd_pr_comment(args):
    from kernelboard.v1 import ingest_pb2

    c = stub().AddComment(ingest_pb2.AddCommentRequest(pull_number=args.number, body=args.message), metadata=metadata())
    emit(args, comment_dict(c), f"commented on pull request #{args.number}")


def conversation(p, comments) -> list[tuple[str, str, str]]:
    """Reviews and comments in the order they were written, as GitHub's conversation shows them: (when, who, text)."""
    entries = [
        (r.reviewed_at.ToDatetime(), r.reviewer, f"{verdict_name(r.verdict)}: {r.body}".rstrip(": ")) for r in p.reviews
    ]
    entries += [(c.created_at.ToDatetime(), c.author, c.body) for c in comments]
    return [(stamp.strftime("%Y-%m-%d %H:%M"), who, text) for stamp, who, text in sorted(entries, key=lambda e: e[0])]


@handler
def cmd_pr_comments(args):
    from kernelboard.v1 import ingest_pb2

    p = stub().GetPullRequest(ingest_pb2.GetPullRequestRequest(number=args.number), metadata=metadata())
    comments = all_pages(stub().ListComments, ingest_pb2.ListCommentsRequest(pull_number=args.number), "comments", 0)
    data = {"comments": [comment_dict(c) for c in comments], "reviews": [review_dict(r) for r in p.reviews]}
    lines = [f"--- {who}, {stamp}\n{text}" for stamp, who, text in conversation(p, comments)]
    emit(args, data, "\n".join(lines) or "no comments or reviews")


def register(subparsers) -> None:
    pr = group(subparsers, "pr", "pull requests from a route into main")
    opened = add(pr, "open", cmd_pr_open, "open a pull request from a route's head")
    opened.add_argument("--route", help="default: the clone's route")
    opened.add_argument("--title", default="", help="title (default: Merge route ROUTE)")
    opened.add_argument("--body", default="", help="what it brings and why (at most 20000 characters)")
    opened.add_argument("-C", metavar="DIR", help="the clone (default: the current directory)")
    show = add(pr, "show", cmd_pr_show, "a pull request: its body, files changed, reviews and its head's checks")
    show.add_argument("number", type=int)
    review = add(pr, "review", cmd_pr_review, "approve, request changes or comment (not on your own)")
    review.add_argument("number", type=int)
    verdict = review.add_mutually_exclusive_group(required=True)
    for name in VERDICTS:
        verdict.add_argument(f"--{name.replace('_', '-')}", dest="verdict", action="store_const", const=name)
    review.add_argument("-m", "--message", default="", help="the review's text")
    merge = add(pr, "merge", cmd_pr_merge, "merge a pull request into main (maintainers)")
    merge.add_argument("number", type=int)
    listed = add(pr, "list", cmd_pr_list, "list pull requests")
    listed.add_argument("--route")
    listed.add_argument("--state", choices=["open", "merged"])
    pr_comment = add(pr, "comment", cmd_pr_comment, "comment on a pull request (anyone signed in)")
    pr_comment.add_argument("number", type=int)
    pr_comment.add_argument("-m", "--message", required=True, help="the comment")
    pr_comments = add(pr, "comments", cmd_pr_comments, "a pull request's conversation: reviews and comments")
    pr_comments.add_argument("number", type=int)
