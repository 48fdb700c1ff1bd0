"""Which code produced a result: the commit, whether the checkout differed from it, and the prompts.

An evaluation folder records this when it starts and compares it when it resumes, so that one table
never mixes rows of two versions of the loop without saying so (backend.eval.spec).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROMPTS_DIR = REPO_ROOT / "backend" / "prompts"


def prompts_digest(prompts_dir: Path = PROMPTS_DIR) -> str:
    """sha256 over every prompt template file, by name and content (the first 16 hex digits)."""
    digest = hashlib.sha256()
    for path in sorted(prompts_dir.rglob("*.py")):
        digest.update(path.relative_to(prompts_dir).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _git(*args: str, root: Path) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def code_identity(root: Path = REPO_ROOT, prompts_dir: Path = PROMPTS_DIR) -> dict:
    """{"commit": the checked-out commit or None outside git, "dirty": None for a clean checkout or a
    short hash of the uncommitted changes to tracked files (two different edits never look alike),
    "prompts": prompts_digest()}."""
    commit = _git("rev-parse", "HEAD", root=root)
    diff = _git("diff", "HEAD", "--no-ext-diff", "--binary", root=root) if commit else None
    return {
        "commit": commit.strip() if commit else None,
        "dirty": hashlib.sha256(diff.encode()).hexdigest()[:12] if diff else None,
        "prompts": prompts_digest(prompts_dir),
    }


def describe(identity: dict) -> str:
    """'commit 1a2b3c4d (with uncommitted changes 9f8e7d6c5b4a), prompts 0123456789abcdef'."""
    commit = f"commit {identity['commit'][:8]}" if identity.get("commit") else "no git commit"
    dirty = f" (with uncommitted changes {identity['dirty']})" if identity.get("dirty") else ""
    return f"{commit}{dirty}, prompts {identity.get('prompts')}"
