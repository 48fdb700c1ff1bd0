"""The reader's examples (training.reader_data) as verl's multi-turn SFT rows, so a GPU cluster trains
the same reader with verl's SFT trainer (`verl.trainer.fsdp_sft_trainer`, `data.multiturn.enable=true`):
the prompt's messages, then one assistant message holding the reader's turn. verl trains every token
of an assistant message, so the app's short prefills inside the turn ("Sentence:", "Answer:") are
trained there too, where the CPU trainer leaves them out; the rest is the same text.

    python -m training reader-data --verl-dir .mia/reader/verl   # train.parquet, validation.parquet
"""

from __future__ import annotations

from pathlib import Path

from training.reader_data import ReaderDataError


def verl_sft_row(row: dict) -> dict:
    turn = "".join(segment["text"] for segment in row["segments"])
    return {"messages": [*({"role": m["role"], "content": m["content"]} for m in row["messages"]),
                         {"role": "assistant", "content": turn}],
            "id": row["id"], "source": row["source"]}


def write_verl_sft(rows: list[dict], folder: Path) -> dict[str, Path]:
    """`<folder>/train.parquet` and `<folder>/validation.parquet` (the rows' own split)."""
    import pandas as pd

    if not rows:
        raise ReaderDataError("No reading examples to write; build them with `python -m training reader-data`.")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for split in ("train", "validation"):
        chosen = [verl_sft_row(row) for row in rows if row["split"] == split]
        if chosen:
            written[split] = folder / f"{split}.parquet"
            pd.DataFrame(chosen).to_parquet(written[split], index=False)
    return written
