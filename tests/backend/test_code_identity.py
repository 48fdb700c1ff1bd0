"""Which code produced a result: commit, uncommitted changes and prompts, read from a real git checkout."""

from __future__ import annotations

import subprocess

from backend.code_identity import code_identity, describe


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_the_identity_tells_commits_edits_and_prompts_apart(tmp_path):
    prompts = tmp_path / "backend" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "planner.py").write_text('PLAN = "Plan the research."\n')
    (tmp_path / "loop.py").write_text("turns = 3\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")

    clean = code_identity(tmp_path, prompts)
    assert len(clean["commit"]) == 40 and clean["dirty"] is None
    (tmp_path / "loop.py").write_text("turns = 4\n")
    edited = code_identity(tmp_path, prompts)
    (tmp_path / "loop.py").write_text("turns = 5\n")
    edited_again = code_identity(tmp_path, prompts)
    assert edited["commit"] == clean["commit"] and edited["dirty"] and edited_again["dirty"] != edited["dirty"]
    assert edited["prompts"] == clean["prompts"]
    (prompts / "planner.py").write_text('PLAN = "Plan the research in sub-questions."\n')
    assert code_identity(tmp_path, prompts)["prompts"] != clean["prompts"]
    assert describe(edited).startswith(f"commit {clean['commit'][:8]} (with uncommitted changes ")


def test_outside_git_only_the_prompts_are_known(tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "judge.py").write_text("JUDGE = 1\n")
    identity = code_identity(tmp_path, prompts)
    assert identity["commit"] is None and identity["dirty"] is None and len(identity["prompts"]) == 16
    assert describe(identity).startswith("no git commit, prompts ")
