"""Give a training step's freed memory back to the system.

glibc serves a large allocation from its heap instead of mapping it anew once a freed mapping has
raised its dynamic threshold (up to 32 MB), and heap memory freed in the middle stays with the process.
A training step allocates and frees activations of every size, so without a fixed threshold the
freed blocks accumulate: one GRPO update of the bfloat16 Qwen2.5-Coder-1.5B copy on a recorded batch
(957 sampled tokens) kept 2.6 GB of anonymous memory after it and peaked at 6.49 GB; with blocks of
1 MB and more always mapped (and unmapped when freed) it kept 0.28 GB and peaked at 4.45 GB.
"""

from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD_BYTES = 1 << 20


def map_large_blocks(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold for this process (where the C library is glibc); whether it was set."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the process's own C library, no lookup
    return bool(mallopt is not None and mallopt(M_MMAP_THRESHOLD, threshold) == 1)
