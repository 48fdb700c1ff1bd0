"""Files replaced whole: written to a temporary file of the writer's own, then renamed over the old one
inside a hold (a learner worker's lease fence, see memory_db.LeaseFence.holding), so a reader sees the
old file or the new one and a writer whose hold is refused changes nothing."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

Hold = Callable[[], AbstractContextManager]


def write_atomically(path: Path, text: str, hold: Hold = nullcontext) -> None:
    """Write `text` to a temporary file of this call's own (two writers never share one), then rename
    it over `path` inside `hold()`; a refused hold leaves `path` as it was and removes the temporary file."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fp:
            fp.write(text)
            fp.flush()
            os.fsync(fp.fileno())
        with hold():
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomically(path: Path, payload: dict, hold: Hold = nullcontext) -> None:
    write_atomically(path, json.dumps(payload, indent=1), hold)
