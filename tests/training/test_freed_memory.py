"""A training process gives freed large blocks back to the system (training.freed_memory)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO_ROOT

# Large blocks freed between small ones that stay, after a freed mapping raised glibc's threshold:
# the pattern of a training step's activations. Prints the anonymous memory the process kept.
PATTERN = textwrap.dedent("""
    import sys
    from pathlib import Path
    import torch
    from training.freed_memory import map_large_blocks
    if sys.argv[1] == "fixed":
        assert map_large_blocks()
    def anonymous():
        status = Path("/proc/self/status").read_text().splitlines()
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("RssAnon:"))
    first = torch.ones(16 << 20, dtype=torch.uint8)
    del first
    before = anonymous()
    kept, freed = [], []
    for _ in range(64):
        freed.append(torch.ones(4 << 20, dtype=torch.uint8))
        kept.append(torch.ones(64 << 10, dtype=torch.uint8))
    del freed
    print(anonymous() - before)
""")


def kept_bytes(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", PATTERN, mode], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True)
    return int(done.stdout.strip().splitlines()[-1])


def test_freed_large_blocks_leave_the_process_once_mapped():
    small_blocks = 64 * (64 << 10)
    assert kept_bytes("fixed") <= small_blocks + (8 << 20)
    assert kept_bytes("glibc's default") > 32 * (4 << 20)  # half the freed blocks stay without it (Debian 12)
