"""Who sees which namespace, and what the read-only demo refuses."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.auth import User, UserDirectory
from app.readonly import ReadOnlyStore
from app.research_tab import history_rows
from app.session import AppContext, ReadOnlyModeError
from backend.agent import RunRequest


def users() -> UserDirectory:
    return UserDirectory({"alice": User("alice", "scrypt$x"), "root": User("root", "scrypt$x", admin=True)})


def as_user(name):
    return SimpleNamespace(username=name)


def test_namespaces_follow_the_login(runtime):
    ctx = AppContext(runtime, users=users())
    assert ctx.namespace_of(as_user("alice")) == "alice"
    assert ctx.visible_namespace(as_user("alice"), "root") == "alice"  # a user cannot look elsewhere
    assert ctx.visible_namespace(as_user("root"), "alice") == "alice"  # an admin can
    assert not ctx.is_admin(as_user("alice")) and ctx.is_admin(as_user("root"))
    local = AppContext(runtime)
    assert local.namespace_of(as_user(None)) == "default"


def test_read_only_demo_reads_but_never_writes(runtime):
    ctx = AppContext(runtime, read_only=True)
    assert isinstance(ctx.agent.store, ReadOnlyStore)
    with pytest.raises(ReadOnlyModeError, match="read-only demo"):
        ctx.require_writable()
    assert AppContext(runtime).agent is runtime.agent


def test_read_only_visitors_runs_are_not_kept_nor_shown_to_the_next_visitor(runtime):
    list(runtime.agent.run(RunRequest("Who founded Arthur's Magazine?")))  # the host's own run, before the demo
    assert len(runtime.runlog.list_runs("default")) == 1
    demo = AppContext(runtime, read_only=True)
    events = list(demo.agent.run(RunRequest("What did the previous visitor ask?")))
    assert events[-1].kind == "run_finished"
    assert len(runtime.runlog.list_runs("default")) == 1  # the visitor's run was not written
    assert history_rows(demo, demo.namespace_of(None)) == []  # nor is the host's run shown
    assert len(history_rows(AppContext(runtime), "default")) == 1
    assert not demo.is_admin(None)  # no visitor may pick another namespace to look at
    assert demo.visible_namespace(None, "alice") == "default"
