"""What one evaluation is, and the record of it kept in its output folder (eval.json).

An evaluation may start from another one's memory (`memory_from`: a finished evaluation folder of
the same method): its memory database is copied in before the first question, so a second pass over
the same questions, or a stream after a warm-up, costs only its own questions.

Resuming into a folder is allowed only for the same evaluation: same questions file, method,
warm-up, seed, models and agent settings. Only the question limit may grow, so a stream can be
extended later without redoing the questions already answered.

An evaluation may put a test-time-learning Planner version in the Planner's place (`planner_version`:
a version folder such as .mia/ttrl/versions/v0003, holding the LoRA in adapter/), on whatever backend
the Planner runs; eval.json's planner identity names the version and the sha256 of its weights.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from backend.methods import METHOD_NAMES as METHODS
from backend.config import (DEFAULT_TOOLS, REMOVED_AGENT_SETTINGS, REMOVED_SETTINGS_COMMIT, REPO_ROOT, AgentConfig,
                            Config)
from backend.eval.datasets import load_questions
from backend.eval.results import ResultsFile
from backend.code_identity import code_identity, describe
from backend.llm.reader_adapter import file_sha256
from backend.llm.registry import backend_spec, reader_adapter_of
from backend.events import Event
from backend.runlog import RunLog

MANIFEST_FILE = "eval.json"
ROWS_FILE = "rows.jsonl"
WARM_ROWS_FILE = "warm.jsonl"
MEMORY_FILE = "memory.sqlite"
RUNS_FOLDER = "runs"
MEMORY_FROM_FILE = "memory_from.json"  # what was copied in: the source folder and the run ids behind its memories
VERSION_ADAPTER = "adapter"  # a Planner version folder's peft LoRA (training.ttrl.version_folder.ADAPTER)
VERSION_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")  # what peft saves, newest format first


class EvalError(ValueError):
    """The evaluation cannot start as asked; the message says what to change."""


@dataclass(frozen=True)
class PlannerVersion:
    """A test-time-learning Planner version folder as an evaluation's Planner answers with it
    (backend.llm.adapters.AdapterVersion): its name is the folder's ("v0003"), its LoRA the folder's
    adapter/, `weights_sha256` that LoRA's weights file's."""

    folder: Path
    weights_sha256: str

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def adapter_path(self) -> Path:
        return self.folder / VERSION_ADAPTER

    @property
    def adapter_dir(self) -> str:
        return str(self.adapter_path)

    @property
    def identity(self) -> str:
        """What eval.json's planner identity adds to the model the Planner runs on."""
        return f"+version:{self.name}@{self.weights_sha256}"


def read_planner_version(folder: Path | str) -> PlannerVersion:
    """The version in `folder` with its weights hashed; EvalError saying what to pass when the folder
    holds no LoRA adapter."""
    folder = Path(folder).resolve()
    adapter = folder / VERSION_ADAPTER
    if not adapter.is_dir() and (folder / "adapter_config.json").is_file():
        raise EvalError(f"--planner-version {folder} is the LoRA adapter itself; pass the version folder that holds "
                        f"it: {folder.parent}.")
    if not adapter.is_dir():
        raise EvalError(
            f"--planner-version {folder} has no {VERSION_ADAPTER}/ folder: pass a test-time-learning version folder "
            f"that holds one, such as <data_dir>/ttrl/versions/v0003 (`python -m training ttrl` lists them). "
            "The base Planner (v0000) has none: leave out --planner-version to evaluate it."
        )
    weights = next((adapter / name for name in VERSION_WEIGHTS if (adapter / name).is_file()), None)
    if weights is None or not (adapter / "adapter_config.json").is_file():
        raise EvalError(
            f"--planner-version {folder}: {adapter} is not a complete LoRA adapter (it needs adapter_config.json and "
            f"{' or '.join(VERSION_WEIGHTS)}, as peft saves them); pass another version folder."
        )
    return PlannerVersion(folder, file_sha256(weights))


@dataclass(frozen=True)
class EvalSpec:
    data: Path
    method: str
    out_dir: Path
    limit: int | None = None
    warm_from: Path | None = None
    warm_limit: int | None = None
    seed: int = 0
    label: str = ""  # how reports name this evaluation; default: method (+ warm-up)
    memory_from: Path | None = None  # a finished evaluation folder whose memory this one starts from
    skip: int = 0  # questions of `data` left out before the first one asked
    teach: bool = False  # ask without ground truth, then give it as a person's typed right answer (the UI's feedback)
    planner_version: PlannerVersion | None = None  # the test-time-learning version the Planner answers with; None: the base
    accept_code_change: bool = False  # resume rows written by other code (recorded in eval.json's code_resumed)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise EvalError(f"--method {self.method!r} is unknown; choose one of {', '.join(METHODS)}.")
        if self.warm_limit is not None and self.warm_from is None:
            raise EvalError("--warm-limit needs --warm-from (the questions that build the memory first).")
        for name, value in (("--limit", self.limit), ("--warm-limit", self.warm_limit)):
            if value is not None and value < 1:
                raise EvalError(f"{name} must be at least 1, got {value}.")

    def check_inputs(self) -> None:
        """Read the question files now, so that a bad file fails before any model is loaded."""
        load_questions(self.data, limit=self.limit, skip=self.skip)
        if self.teach and self.warm_from is not None:
            raise EvalError("--teach goes without --warm-from: the taught questions are the evaluation's own.")
        if self.warm_from is not None:
            load_questions(self.warm_from, limit=self.warm_limit)
        if self.memory_from is not None:
            source = read_manifest(self.memory_from)
            if source.get("namespace") != self.namespace:
                raise EvalError(
                    f"--memory-from {self.memory_from} holds the memory of method {source.get('method')!r}; "
                    f"this evaluation runs {self.method!r}. Use the same --method, or another folder."
                )
            if Path(self.memory_from).resolve() == Path(self.out_dir).resolve():
                raise EvalError("--memory-from names the --out folder itself; give the finished evaluation to start from.")
            if not (Path(self.memory_from) / MEMORY_FILE).is_file():
                raise EvalError(f"--memory-from {self.memory_from} has no {MEMORY_FILE}; run that evaluation first.")

    @property
    def namespace(self) -> str:
        return f"eval-{self.method}"

    @property
    def display_label(self) -> str:
        if self.label:
            return self.label
        if self.planner_version is not None:
            return f"{replace(self, planner_version=None).display_label}, Planner {self.planner_version.name}"
        if self.teach:
            return f"{self.method} (taught)"
        if self.memory_from is not None:
            return f"{self.method} (memory of {Path(self.memory_from).name})"
        if self.warm_from is None:
            return f"{self.method} (cold)"
        warm = f"{self.warm_limit} of " if self.warm_limit else ""
        return f"{self.method} (warm: {warm}{self.warm_from.stem})"

    @property
    def memory_url(self) -> str:
        return memory_url_for(self.out_dir)


def memory_url_for(out_dir: Path) -> str:
    """The evaluation's own memory database, inside its output folder."""
    return f"sqlite:///{(Path(out_dir) / MEMORY_FILE).resolve()}"


def copy_memory_from(spec: EvalSpec) -> None:
    """Start `spec.out_dir` with a copy of `spec.memory_from`'s memory database (SQLite's backup, so a
    source still open elsewhere is copied consistently), once: a resumed folder keeps its own. The run
    ids behind the copied memories are recorded, so that resuming never takes them for leftovers."""
    if spec.memory_from is None:
        return
    target = Path(spec.out_dir) / MEMORY_FILE
    if target.exists():
        return
    source_dir = Path(spec.memory_from)
    Path(spec.out_dir).mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"file:{source_dir / MEMORY_FILE}?mode=ro", uri=True)
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    run_ids = sorted(row.run_id for name in (WARM_ROWS_FILE, ROWS_FILE) for row in ResultsFile(source_dir / name).read())
    record = {"folder": portable_path(source_dir), "run_ids": run_ids}
    (Path(spec.out_dir) / MEMORY_FROM_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def logged_events(out_dir: Path, namespace: str, run_id: str) -> list[Event] | None:
    """The event stream an evaluation folder keeps for one run (None when its log is not there)."""
    try:
        return RunLog(Path(out_dir) / RUNS_FOLDER).load(namespace, run_id)
    except (KeyError, ValueError):
        return None


def inherited_run_ids(out_dir: Path) -> set[str]:
    """The runs whose memories were copied in with --memory-from (none without it)."""
    path = Path(out_dir) / MEMORY_FROM_FILE
    return set(json.loads(path.read_text(encoding="utf-8"))["run_ids"]) if path.is_file() else set()


def role_identity(config: Config, planner_version: PlannerVersion | None = None) -> dict[str, str]:
    """Which model each role runs on, as the configuration names it, with the trained reader the
    Executor answers with (its folder and the sha256 of its weights) and the Planner version the
    Planner answers with (its name and the sha256 of its weights)."""
    identity = {name: backend_spec(role.backend).identity(role) + reader_identity(config, role)
                for name, role in sorted(config.roles.items())}
    if planner_version is not None:
        identity["planner"] += planner_version.identity
    return identity


def reader_identity(config: Config, role) -> str:
    reader = reader_adapter_of(config, role)
    return f"+reader:{reader.folder.name}@{str(reader.manifest.get('adapter_sha256', ''))[:12]}" if reader else ""


def portable_path(path: Path | str) -> str:
    """A questions file inside the repository is recorded relative to it, so that a result folder
    committed with the project can be resumed from any checkout; other files keep their full path."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(resolved)


def _recorded_path(value: str | None) -> str | None:
    """A path as an older eval.json may hold it (absolute, perhaps in another checkout), made
    comparable with portable_path: an absolute path whose tail lies in this repository counts as it."""
    if not value:
        return value
    path = Path(value)
    if not path.is_absolute():
        return path.as_posix()
    parts = path.parts
    for start in range(1, len(parts)):
        candidate = Path(*parts[start:])
        if (REPO_ROOT / candidate).is_file():
            # As portable_path records it: a folder of the repository that links elsewhere keeps the target's path.
            return portable_path(REPO_ROOT / candidate)
    return value


def manifest_for(spec: EvalSpec, config: Config) -> dict:
    return {
        "label": spec.display_label,
        "method": spec.method,
        "namespace": spec.namespace,
        "data": portable_path(spec.data),
        "limit": spec.limit,
        "warm_from": portable_path(spec.warm_from) if spec.warm_from else None,
        "warm_limit": spec.warm_limit,
        "memory_from": portable_path(spec.memory_from) if spec.memory_from else None,
        "skip": spec.skip,
        "teach": spec.teach,
        "seed": spec.seed,
        "models": role_identity(config, spec.planner_version),
        "agent": {**asdict(config.agent), "tools": list(config.agent.tools)},  # as eval.json reads it back
        "search": asdict(config.search),
        "code": code_identity(),
    }


# Everything but these must match for a folder to be resumed; the code is checked by check_same_code.
_MAY_CHANGE = ("label", "limit", "code", "code_resumed")


def check_same_code(spec: EvalSpec, previous: dict, now: dict, rows_before: int) -> list[dict]:
    """The folder's record of resumes under other code, with this one added where the code differs.
    Refuses changed prompts always, and other changed code unless spec.accept_code_change. A folder
    written before the code was recorded resumes, and the resume is recorded."""
    resumed = list(previous.get("code_resumed") or [])
    last = resumed[-1] if resumed else previous.get("code")
    same = last is not None and all(last.get(key) == now[key] for key in ("commit", "dirty", "prompts"))
    if same:
        return resumed
    if last is not None and last.get("prompts") != now["prompts"]:
        raise EvalError(
            f"{spec.out_dir}'s rows were written with other prompts ({describe(last)}; now {describe(now)}): "
            "one table would mix two Planners. Use a new --out folder, or check out that commit to resume."
        )
    if last is not None and not spec.accept_code_change:
        raise EvalError(
            f"{spec.out_dir}'s rows were written by {describe(last)}; this checkout is {describe(now)}. "
            "Use a new --out folder, check out that commit to resume, or pass --accept-code-change to resume "
            "and record the change in eval.json."
        )
    return [*resumed, {**now, "rows_before": rows_before}]


def check_or_write_manifest(spec: EvalSpec, config: Config) -> dict:
    """Write eval.json in a new folder; in a used one, refuse a different evaluation."""
    if spec.planner_version is not None and config.role("planner").adapter_dir:
        raise EvalError("roles.planner.adapter_dir (MIA_PLANNER_ADAPTER_DIR) and --planner-version both name the "
                        "Planner's adapter; leave out the setting and give the version folder alone.")
    path = spec.out_dir / MANIFEST_FILE
    manifest = manifest_for(spec, config)
    if path.exists():
        try:
            previous = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise EvalError(f"{path} is damaged ({exc.msg}); use a new --out folder.") from None
        previous = with_later_defaults(previous)
        if removed_variants_run(previous):
            raise EvalError(
                f"{spec.out_dir} ran {removed_variants_run(previous)}, a variant measured and removed since "
                f"(docs/results.md). Use a new --out folder, or check out commit {REMOVED_SETTINGS_COMMIT} "
                "(the last that has it) to resume it."
            )
        for key in ("data", "warm_from"):
            previous[key] = _recorded_path(previous.get(key))
        differences = [
            key for key in manifest if key not in _MAY_CHANGE and previous.get(key) != manifest[key]
        ]
        if differences:
            details = "; ".join(f"{key}: was {previous.get(key)!r}, now {manifest[key]!r}" for key in differences)
            raise EvalError(
                f"{spec.out_dir} holds another evaluation ({details}). "
                "Use a new --out folder, or repeat the original options to resume it."
            )
        rows_before = sum(len(ResultsFile(spec.out_dir / name).read()) for name in (WARM_ROWS_FILE, ROWS_FILE))
        manifest["code_resumed"] = check_same_code(spec, previous, manifest["code"], rows_before)
        manifest["code"] = previous.get("code")
        if not manifest["code_resumed"]:
            del manifest["code_resumed"]
    spec.out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def read_manifest(out_dir: Path) -> dict:
    path = Path(out_dir) / MANIFEST_FILE
    if not path.is_file():
        raise EvalError(f"{out_dir} is not an evaluation folder (no {MANIFEST_FILE}); run `python -m backend.eval` into it first.")
    return with_later_defaults(json.loads(path.read_text(encoding="utf-8")))


def with_later_defaults(manifest: dict) -> dict:
    """A manifest written before an option or setting existed, as the evaluation it records: it ran
    without that option (no --memory-from, --skip or --teach) and with the setting off (image_text_first).
    Before a person's answers were recalled no memory held one, so any taught_min_similarity ran alike.
    A removed variant's setting at the value that left it off is dropped (REMOVED_AGENT_SETTINGS)."""
    manifest.setdefault("memory_from", None)
    manifest.setdefault("skip", 0)
    manifest.setdefault("teach", False)
    calculator = manifest["search"].pop("calculator", False) if isinstance(manifest.get("search"), dict) else False
    if isinstance(manifest.get("agent"), dict):
        # Before agent.tools the tools were fixed, and search.calculator = true added the calculator.
        manifest["agent"].setdefault("tools", [*DEFAULT_TOOLS, *(["calculate"] if calculator else [])])
        manifest["agent"].setdefault("taught_min_similarity", AgentConfig().taught_min_similarity)
        # Before the caption threshold an evaluation's images (none so far) were captioned by any match.
        manifest["agent"].setdefault("caption_min_similarity", AgentConfig().caption_min_similarity)
        manifest["agent"].setdefault("image_text_first", False)  # before it every run planned first
        for key, off in REMOVED_AGENT_SETTINGS.items():
            if manifest["agent"].get(key, off) == off:
                manifest["agent"].pop(key, None)
    return manifest


def removed_variants_run(manifest: dict) -> str:
    """The removed variants a manifest (read by with_later_defaults) ran, as "agent.plan_candidates = 4";
    "" for none."""
    agent = manifest.get("agent") if isinstance(manifest.get("agent"), dict) else {}
    return ", ".join(f"agent.{key} = {json.dumps(agent[key])}" for key in REMOVED_AGENT_SETTINGS if key in agent)
