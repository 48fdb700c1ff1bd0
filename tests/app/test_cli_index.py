"""`python -m app index PATH...`: files and folders go into a collection of the namespace given, an
unreadable file is named (and the exit status says so) while the rest go in, OCR's state is
printed, and adding again is incremental."""

from __future__ import annotations

from app.cli import main
from backend.config import load_config
from backend.documents import ocr
from backend.runtime import document_store


def test_index_adds_a_folder_names_the_broken_file_and_is_incremental(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MIA_DATA_DIR", str(tmp_path / "data"))
    folder = tmp_path / "papers"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "reactors.md").write_text("# Reactors\n\nThe Quillmoor reactor opened in 1987.\n", encoding="utf-8")
    (folder / "notes.txt").write_text("Kittens and puppies.\n", encoding="utf-8")
    (folder / "broken.docx").write_bytes(b"not a zip")

    assert main(["index", str(folder), "--namespace", "alice"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == ocr.ocr_status()
    assert "Collection papers (namespace alice):" in out and "sub/reactors.md: 1 passage" in out
    assert "FAILED broken.docx: not a DOCX file" in err
    assert "2 added, 0 unchanged, 1 failed." in out

    store = document_store(load_config())
    assert [(c.label, [f.name for f in c.files]) for c in store.collections("alice")] == [
        ("papers", ["notes.txt", "sub/reactors.md"])]
    assert store.collections("default") == []
    assert store.search("alice", ["Quillmoor reactor"], 1)[0][0][0].url == "doc://papers/sub/reactors.md#section=Reactors"

    (folder / "broken.docx").unlink()
    assert main(["index", str(folder), "--namespace", "alice"]) == 0
    assert "0 added, 2 unchanged, 0 failed." in capsys.readouterr().out

    assert main(["index", str(folder / "notes.txt"), "--collection", "Shared Notes", "--shared"]) == 0
    assert "Collection shared/Shared-Notes (namespace default):" in capsys.readouterr().out
    assert [c.label for c in store.collections("bob")] == ["shared/Shared-Notes"]

    assert main(["index", "--reindex", "--collection", "papers", "--namespace", "alice"]) == 0
    assert "notes.txt: 1 passage" in capsys.readouterr().out
    assert main(["index", str(folder), "--collection", "../up"]) == 2
    assert "climbs out of its folder" in capsys.readouterr().err
    assert main(["index"]) == 2 and "Give the files or folders to add" in capsys.readouterr().err
