"""Command line: `python -m app` serves the web UI; `python -m app ask "QUESTION"` researches in the terminal;
`python -m app index PATH...` adds your own documents to a collection the search reads."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from dataclasses import replace
from typing import Sequence

from app.learner_notice import question_running
from backend.config import ConfigError, load_config
from backend.events import RunFailed, StepTaken, TextDelta
from backend.agent import RunRequest
from backend.follow_up import FollowUp
from backend.inputs import InputError
from backend.llm.base import LLMError
from backend.plan_review import PlanError, checked_plan, parse_plan_text


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app", description="MIA research assistant")
    parser.add_argument("--config", help="TOML configuration file (default: mia.toml or $MIA_CONFIG)")
    sub = parser.add_subparsers(dest="command")

    serve = sub.add_parser("serve", help="serve the web UI (the default)")
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 7860)")
    add_serve_options(serve)

    ask = sub.add_parser("ask", help="research one question in the terminal")
    ask.add_argument("question")
    ask.add_argument("--ground-truth", help="the right answer, if known: the Judge grades against it")
    ask.add_argument("--image", help="path to an image that goes with the question")
    ask.add_argument("--caption", help="what the image shows (otherwise the image index is searched)")
    ask.add_argument("--namespace", default="default", help="whose memory to use (default: default)")
    ask.add_argument("--json", action="store_true", help="print events as JSON lines")
    ask.add_argument("--review-plan", action="store_true",
                     help="print the Planner's plan and read your edited plan (from $EDITOR, the terminal, or "
                          "standard input) before it runs; it is then researched exactly as written")
    ask.add_argument("--follow-up", metavar="RUN_ID",
                     help="ask QUESTION as a follow-up of that run: read with its thread ('she', 'it' replaced), "
                          "and its passages reused")

    prepare = sub.add_parser("prepare", help="prepare the models and the search index, then exit")
    prepare.add_argument("--search-only", action="store_true",
                         help="build the wiki's search index (BM25 and its dense vectors) only, not the models")
    # How `ask` starts the build it leaves running: nice'd, and gone at once if a build already runs.
    prepare.add_argument("--background", action="store_true", help=argparse.SUPPRESS)

    index = sub.add_parser("index", help="add your own documents (files or folders) to a collection the search reads")
    index.add_argument("paths", nargs="*", metavar="PATH",
                       help="PDF, Markdown, text, HTML or DOCX files, or folders of them (searched recursively)")
    index.add_argument("--namespace", default="default", help="whose documents they are (default: default)")
    index.add_argument("--collection", help="the collection to add to (default: the folder's name, or 'documents')")
    index.add_argument("--shared", action="store_true", help="a shared collection, which every namespace reads")
    index.add_argument("--reindex", action="store_true",
                       help="read the collection's files again from their stored copies (e.g. after installing "
                            "tesseract) instead of adding PATHs")

    hasher = sub.add_parser("hash-password", help="print a salted hash for a users.toml password")
    hasher.add_argument("--stdin", action="store_true", help="read the password from standard input (scripts)")

    # `python -m app --host ... --auth users.toml` serves too, without naming the subcommand.
    parser.add_argument("--host", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    add_serve_options(parser)
    return parser


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--auth", metavar="USERS_TOML",
                        help="require logins from this users.toml; each user gets their own memory namespace")
    parser.add_argument("--read-only", action="store_true",
                        help="demo mode: memories can be seen and used but not changed")


def cmd_ask(args: argparse.Namespace) -> int:
    from app.render_text import event_to_text, json_for_terminal
    from app.vector_build import dense_vectors_ready
    from backend.runtime import build_runtime

    config = load_config(args.config)
    vectors_missing = not dense_vectors_ready(config)
    if vectors_missing:  # BM25 answers now; embedding the wiki would keep the answer 20-60 minutes
        config = replace(config, search=replace(config.search, hybrid=False))
    runtime = build_runtime(config, progress=True)
    if vectors_missing:  # the BM25 index exists now: the build only embeds
        print(build_vectors_later(args.config, config), file=sys.stderr if args.json else sys.stdout, flush=True)
    failed = False
    try:
        request = RunRequest(
            question=args.question,
            namespace=args.namespace,
            image=args.image,
            caption=args.caption,
            ground_truth=args.ground_truth,
        )
        notes = sys.stderr if args.json else sys.stdout
        try:
            request = steered_request(runtime.agent, request, args, notes)
        except (InputError, LLMError) as exc:
            print(f"Error: {exc}", file=sys.stderr)
            return 2
        with question_running(learner_for_ask(runtime, quiet=args.json)) as still_running:
            for event in runtime.agent.run(request):
                still_running()
                if args.json:
                    print(json_for_terminal(event.to_dict()), flush=True)
                elif isinstance(event, (TextDelta, StepTaken)):
                    continue  # the terminal prints each finished step as it happens instead
                else:
                    print(event_to_text(event), flush=True)
                failed = failed or isinstance(event, RunFailed)
    finally:
        runtime.close()
    return 1 if failed else 0


PLAN_HEADER = ("# The Planner's plan for: {question}\n"
               "# Edit it: one {noun} a line, reworded, added, removed or reordered; #1, #2 stand for the answers\n"
               "# of the sub-questions above. Lines starting with \"# \" are left out. It runs exactly as written.\n")


def steered_request(agent, request: RunRequest, args: argparse.Namespace, notes) -> RunRequest:
    """`request` with what the person steers: a follow-up read with its thread (--follow-up), and the plan
    they reviewed (--review-plan). InputError says what to change; the plan's error comes with the
    Planner's plan again."""
    if args.follow_up:
        made = agent.read_follow_up(request.question, request.namespace, args.follow_up)
        print(f"Follow-up of run {args.follow_up}: researched as \"{made.question}\". {made.how}", file=notes, flush=True)
        request = replace(request, question=made.question, follow_up=FollowUp(args.follow_up, request.question, made.how))
    if not args.review_plan:
        return request
    draft = agent.draft_plan(request)
    noun = "sub-question" if draft.shape == "subquestions" else "step"
    template = PLAN_HEADER.format(question=draft.question, noun=noun) + draft.text + "\n"
    if draft.note:
        template += f"# (the Planner's text needed: {draft.note})\n"
    edited = edited_plan_text(template, notes)
    try:
        plan = checked_plan(parse_plan_text(edited), draft.shape, agent.config.agent.max_question_chars)
    except PlanError as exc:
        raise PlanError(f"{exc} The Planner's plan was:\n{draft.text}") from None
    return replace(request, plan=plan, drafted_plan=draft.steps)


def edited_plan_text(template: str, notes) -> str:
    """The plan as the person edited it: in $VISUAL or $EDITOR on a terminal, else typed in the terminal
    (an empty first line keeps it as drafted), else read whole from standard input (a script's edit)."""
    import os
    import shlex
    import subprocess
    import tempfile

    print(template, file=notes, flush=True)
    if not sys.stdin.isatty():
        return sys.stdin.read()
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if editor:
        with tempfile.NamedTemporaryFile("w+", suffix=".plan.txt", encoding="utf-8", delete=False) as file:
            file.write(template)
        try:
            subprocess.run([*shlex.split(editor), file.name], check=True)
            with open(file.name, encoding="utf-8") as edited:
                return edited.read()
        finally:
            os.unlink(file.name)
    print("Type the plan, one line each, then an empty line (an empty first line keeps it as drafted):",
          file=notes, flush=True)
    lines = []
    for line in sys.stdin:
        if not line.strip():
            break
        lines.append(line)
    return "".join(lines) or template


def learner_for_ask(runtime, *, quiet: bool = False):
    """With test-time learning on, a question asked here is answered by the Planner version the
    learner promoted, and the learner worker (the app's or one run on its own) gives way while it
    runs, as for a question asked in the web app. None when learning is off."""
    if not runtime.config.ttrl.enabled:
        return None
    from training.ttrl.live import worker_handle  # imports torch: only with learning on

    try:
        learner = worker_handle(runtime)
    except Exception as exc:  # a promoted version that cannot be loaded must not stop the question
        print(f"The learner's current Planner version could not be loaded ({exc}); the base Planner answers.",
              file=sys.stderr, flush=True)
        return None
    if learner.load_problem:
        print(learner.load_problem, file=sys.stderr, flush=True)
    version = learner.answering.number
    if version and not quiet:
        print(f"Planner v{version:04d} answers (test-time learning).", flush=True)
    return learner


def build_vectors_later(config_path: str | None, config) -> str:
    """Start the background build of the dense vectors (unless one runs); the line that says so."""
    from app.vector_build import SEARCH_LINE, build_running, log_path, start_background_build

    if not build_running(config):
        try:
            start_background_build(config_path, config)
        except OSError as exc:
            return (f"Search: BM25 only; the dense vectors could not be built in the background ({exc}): "
                    "python -m app prepare builds them.")
    return f"{SEARCH_LINE}; log: {log_path(config)}"


def cmd_prepare(args: argparse.Namespace) -> int:
    from app.vector_build import build_search_index, log_path
    from backend.tools.dense_build import build_lock
    from backend.runtime import build_runtime

    config = load_config(args.config)
    if args.search_only:
        print(build_search_index(config, background=args.background), flush=True)
        return 0

    def waiting(pid: int | None) -> None:
        print(f"Waiting for the dense vectors a background build (pid {pid}) is making; its log: {log_path(config)}",
              flush=True)

    with build_lock(config.index_cache_dir, wait=True, on_wait=waiting):
        runtime = build_runtime(config, progress=True)
    runtime.close()
    print("The models and the search index are ready.")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from pathlib import Path

    from backend.documents import DocumentError, ocr_status
    from backend.runtime import document_store
    from memory_db import get_embedder

    config = load_config(args.config)
    paths = [Path(path) for path in args.paths]
    if not paths and not (args.reindex and args.collection):
        print("Give the files or folders to add (or --reindex --collection NAME).", file=sys.stderr)
        return 2
    collection = args.collection or (paths[0].resolve().name if len(paths) == 1 and paths[0].is_dir() else "documents")
    print(ocr_status(), flush=True)
    store = document_store(config, get_embedder())
    shown = [-1]

    def progress(fraction: float, text: str) -> None:
        percent = int(fraction * 100)
        if percent >= shown[0] + 10 or fraction >= 1.0:
            shown[0] = percent
            print(f"  {percent:3d}% {text}", file=sys.stderr, flush=True)

    try:
        if args.reindex:
            report = store.reindex(args.namespace, collection, shared=args.shared, progress=progress)
        else:
            report = store.add_paths(args.namespace, collection, paths, shared=args.shared, progress=progress)
    except DocumentError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    where = f"shared/{report.collection}" if report.shared else report.collection
    print(f"Collection {where} (namespace {args.namespace}):")
    for line in report.lines():
        print(f"  {line}", file=sys.stderr if line.startswith("FAILED") else sys.stdout)
    print(f"{len(report.indexed)} added, {len(report.unchanged)} unchanged, {len(report.failed)} failed.")
    return 1 if report.failed else 0


def cmd_serve(args: argparse.Namespace) -> int:
    from app.ui import PortInUseError, serve

    from app.auth import AuthError, UserDirectory

    config = load_config(args.config)
    host = getattr(args, "host", None) or config.app.host
    port = getattr(args, "port", None) or config.app.port
    users = None
    if args.auth:
        try:
            users = UserDirectory.load(args.auth)
        except AuthError as exc:
            print(f"Login file error: {exc}", file=sys.stderr)
            return 2
    elif not _is_loopback(host):
        print(
            f"Refusing to bind to {host}: without --auth the app only listens on 127.0.0.1. "
            "For a shared demo, give --auth users.toml (see `python -m app hash-password`).",
            file=sys.stderr,
        )
        return 2
    try:
        serve(config, host=host, port=port, users=users, read_only=args.read_only, config_path=args.config)
    except PortInUseError as exc:
        print(exc, file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # SIGINT or SIGTERM outside the server's own wait: what had started is stopped too
        print("Stopped.", file=sys.stderr)
    return 0


def cmd_hash_password(args: argparse.Namespace) -> int:
    import getpass

    from app.auth import AuthError, hash_password

    if args.stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            print("The two passwords differ; nothing was printed.", file=sys.stderr)
            return 2
    try:
        print(hash_password(password))
    except AuthError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        if args.command == "ask":
            return cmd_ask(args)
        if args.command == "prepare":
            return cmd_prepare(args)
        if args.command == "index":
            return cmd_index(args)
        if args.command == "hash-password":
            return cmd_hash_password(args)
        return cmd_serve(args)
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return 2
