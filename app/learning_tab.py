"""The learning view: test-time learning's state, its Planner versions and the signals it learned from.

With logins on, the Planner's weights are shared by every user: only an admin may pause, resume or
roll back; everyone sees the state, and each user sees only the signals and feedback of their own
namespace. The functions below are what the view's buttons call (the tests call them the same way).
"""

from __future__ import annotations

import logging
from datetime import datetime
from statistics import median
from typing import TYPE_CHECKING

import gradio as gr

from app.escaping import escape_markdown
from app.session import AppContext
from backend.code_identity import prompts_digest
from backend.config import ConfigError

if TYPE_CHECKING:  # the learner imports torch and peft; the app imports it only when learning is on
    from training.ttrl.learner import LearnerStatus

log = logging.getLogger(__name__)

QUEUE_COLUMNS = ["when", "user", "run id", "question", "label before", "label after", "right answer", "comment"]
VERSION_COLUMNS = ["version", "status", "parent", "created", "train reward", "canary reward (vs parent)",
                   "update s", "canary s", "signals", "rollouts", "note"]
SIGNAL_COLUMNS = ["when", "namespace", "kind", "question", "Planner", "rewards", "correct", "memories stored",
                  "seconds", "error"]
RECENT_SIGNALS = 50
RECENT_UPDATES = 10  # Planner updates the speed line takes its median over

SWITCH_ON = ("To switch it on, set `enabled = true` under `[ttrl]` in mia.toml (or start the app with "
             "`MIA_TTRL_ENABLED=true`) and restart the app.")
ADMIN_ONLY = "⚠️ Only an admin can pause, resume or roll back test-time learning: the Planner is shared by every user."


def _when(epoch: float | None) -> str:
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S") if epoch else ""


def _reward(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _may_steer(ctx: AppContext, request: gr.Request | None) -> bool:
    """Whether this person may pause, resume and roll back (the local user, or an admin with logins)."""
    return ctx.learner is not None and not ctx.read_only and (ctx.users is None or ctx.is_admin(request))


def _sees_everything(ctx: AppContext, request: gr.Request | None) -> bool:
    return ctx.users is None or ctx.is_admin(request)


def _worker_alive(ctx: AppContext) -> bool:
    return ctx.learner is not None and ctx.learner.running


def _why_not_running(ctx: AppContext) -> str:
    """The rest of "the learner is not running: ..." (a supervised worker says how it ended and when it restarts)."""
    from training.ttrl.remote import RemoteLearner

    if isinstance(ctx.learner, RemoteLearner):
        return ctx.learner.why_not_running()
    return "its thread is not running (it was not started, or it stopped: the server log says why)"


def _signals_wait(count: int) -> str:
    return f"{count} signal{'s' if count != 1 else ''} wait{'s' if count == 1 else ''}"


def _what_waits(ctx: AppContext) -> str:
    """What waits for the learner in all namespaces, and whether a learner runs to take it."""
    waiting = ctx.learner.pending_count()  # pending signals and queued entries not taken yet
    if not _worker_alive(ctx):
        return f"{_signals_wait(waiting)}; the learner is not running: {escape_markdown(_why_not_running(ctx))}."
    unread = ctx.queue.untaken_count()
    if unread:
        return f"{unread} queued entr{'ies' if unread != 1 else 'y'} in all namespaces wait for the learner to take them."
    if waiting:
        return f"{_signals_wait(waiting)} for the learner's rollouts; it has read every queued entry."
    return "The learner has taken everything queued in all namespaces."


def _memory_line(ctx: AppContext) -> str:
    """What training the Planner needs beside what is free (measured by benchmarks/learner_memory_bench.py)."""
    from training.ttrl.live import learner_memory_need
    from training.ttrl.memory_fit import GB, free_memory_bytes

    try:
        need = learner_memory_need(ctx.runtime.config)
    except (ConfigError, ValueError, OSError) as exc:
        return f"- Memory: what training the Planner needs is unknown ({escape_markdown(exc)})"
    return (f"- Memory: training the Planner needs {need.description} free when its weights load; "
            f"{free_memory_bytes() / GB:.1f} GB is free on this machine now")


# -- what the view shows ---------------------------------------------------------------------------
def _speed_line(ctx: AppContext, versions) -> str:
    """What learning costs on this machine: seconds per question learned from, per update and canary."""
    signals = [float(r["seconds"]) for r in ctx.learner.read_log("signals.jsonl")[-RECENT_SIGNALS:]
               if "error" not in r and isinstance(r.get("seconds"), (int, float))]
    updates = [v for v in versions if v.update_seconds][-RECENT_UPDATES:]
    if not signals and not updates:
        return "- Speed: nothing learned from yet"
    parts = []
    if signals:
        parts.append(f"{median(signals):.0f} s per question learned from (median of the last {len(signals)})")
    if updates:
        canaries = [v.canary_seconds for v in updates if v.canary_seconds]
        canary = f" and its canary {median(canaries):.0f} s" if canaries else ""
        parts.append(f"{median([v.update_seconds for v in updates]):.0f} s per Planner update{canary} "
                     f"(median of the last {len(updates)} update{'s' if len(updates) != 1 else ''})")
    return "- Speed: " + "; ".join(parts)


def status_markdown(ctx: AppContext, request: gr.Request | None) -> str:
    if ctx.learner is not None:
        try:
            ctx.learner.sync()  # a version the worker promoted answers from now on, as it would the next question
        except Exception:  # the status below says what the learner could not do
            log.exception("loading the current Planner version")
    return _learning_state(ctx, request) + _answering_line(ctx)


def _answering_line(ctx: AppContext) -> str:
    """Which Planner answers in this app: the version (as the versions table names it) and the model."""
    planner = ctx.runtime.agent.models.get("planner")
    if planner is None:
        return ""
    model = f"`{escape_markdown(planner.name)}`"
    status = ctx.learner.status() if ctx.learner is not None and not ctx.read_only else None
    if status is None or status.answering is None:
        return f"\n\nThe Planner answering now: {model}."
    version = f"`v{status.answering:04d}`" + (" (the base model)" if status.answering == 0 else "")
    line = f"\n\nThe Planner answering now: {version}, {model}."
    if status.load_problem:
        line += f" ⚠️ {escape_markdown(status.load_problem)}"
    return line


def _learning_state(ctx: AppContext, request: gr.Request | None) -> str:
    if ctx.read_only:
        return ("**Test-time learning is off: this is a read-only demo.** The demo never learns: the Planner's "
                "weights and the memories stay as they are, and feedback is not accepted.")
    if ctx.learner is None and ctx.runtime.config.ttrl.enabled and ctx.learning_off_reason:
        return (f"**Test-time learning is not running**: {ctx.learning_off_reason} Feedback you give on answers "
                "still relabels memories and stays queued below.")
    if ctx.learner is None and ctx.runtime.config.ttrl.enabled:
        return ("**Test-time learning is not running in this app**, although `ttrl.enabled` is true: this app was "
                "started without its learner (`python -m app serve` starts it). Feedback stays queued below.")
    if ctx.learner is None:
        return ("**Test-time learning is switched off** (`ttrl.enabled = false`). Feedback you give on answers "
                "still relabels memories and updates win rates now, and it stays queued below; the learner "
                "reads the whole queue when it starts, so nothing is lost. " + SWITCH_ON)
    s: LearnerStatus = ctx.learner.status()
    settings = ctx.learner.settings
    current = next((v for v in s.versions if v.number == s.current_version), None)
    if not s.enabled:
        state = "**Test-time learning is switched off** in its settings (`ttrl.enabled = false`). " + SWITCH_ON
    elif s.paused:
        state = ("**Test-time learning is paused.** Signals keep queueing; no rollouts and no Planner updates "
                 "happen until it is resumed.")
    elif not _worker_alive(ctx):
        state = f"**Test-time learning is on, but the learner is not running.** {_what_waits(ctx)}"
    else:
        state = "**Test-time learning is on.** The Planner learns in the background; answering never waits for it."
    canary = f", canary reward {current.canary_reward:.3f}" if current and current.canary_reward is not None else ""
    current_text = f"`v{s.current_version:04d}`" + (" (the base model)" if s.current_version == 0 else "")
    lines = [
        state,
        "",
        f"- Activity: {escape_markdown(s.activity)}",
        f"- Pending signals: **{s.pending}** (questions waiting for rollouts)",
        f"- Batch: **{s.batch}/{s.signals_per_update}** scored questions toward the next Planner update",
        f"- Rollout budget: **{s.budget_left}** of {s.rollouts_per_hour} rollouts left this hour "
        f"({settings.rollouts_per_signal} per question)",
        f"- Current Planner: {current_text}{canary}; {len(s.versions)} version{'s' if len(s.versions) != 1 else ''} in all",
        f"- Canary: {settings.canary_size} held-out question{'s' if settings.canary_size != 1 else ''}; a new version "
        f"is promoted only if its canary reward is at least the current one's"
        + (f" minus {settings.canary_tolerance:g}" if settings.canary_tolerance else ""),
        f"- Unsupervised learning from questions without feedback: {'on' if settings.unsupervised else 'off'}",
        _speed_line(ctx, s.versions),
        _memory_line(ctx),
        f"- Last error: {escape_markdown(s.last_error) if s.last_error else 'none'}",
    ]
    if current is not None and current.prompts and current.prompts != prompts_digest():
        lines.append(f"- ⚠️ Planner `{current.name}` was trained with other prompts than this code's "
                     "(`backend/prompts/` changed since): if its plans get worse, roll back to 0, the base model")
    lines += [f"- ⚠️ {escape_markdown(note)}." for note in s.version_notes]
    if s.quarantined and _sees_everything(ctx, request):  # the rows' reasons quote what was queued
        lines.append(f"- ⚠️ {escape_markdown(s.quarantined)} (kept in the queue, never read again; "
                     "the rows after them are learned)")
    if ctx.users is not None and not ctx.is_admin(request):
        lines += ["", "The Planner is shared by every user, so only an admin can pause, resume or roll it back."]
    return "\n".join(lines)


def version_rows(ctx: AppContext) -> list[list]:
    if ctx.learner is None:
        return []
    status = ctx.learner.status()
    rows = []
    for v in reversed(status.versions):
        name = v.name + (" ◀ current" if v.number == status.current_version else "")
        if v.canary_reward is None:
            canary = "not measured yet"
        elif v.parent_canary_reward is None:
            canary = _reward(v.canary_reward)
        else:
            canary = (f"{v.canary_reward:.3f} vs {v.parent_canary_reward:.3f} "
                      f"({v.canary_reward - v.parent_canary_reward:+.3f})")
        rows.append([
            name, v.status, "" if v.parent is None else f"v{v.parent:04d}", _when(v.created), _reward(v.train_reward),
            canary, f"{v.update_seconds:.1f}" if v.update_seconds else "", f"{v.canary_seconds:.1f}" if v.canary_seconds else "",
            v.signals, v.rollouts, v.note,
        ])
    return rows


def signal_rows(ctx: AppContext, request: gr.Request | None) -> list[list]:
    """The most recent signals, newest first; a user sees only their own namespace's."""
    if ctx.learner is None:
        return []
    everything = _sees_everything(ctx, request)
    mine = ctx.namespace_of(request)
    rows = []
    for record in reversed(ctx.learner.read_log("signals.jsonl")):
        namespace = record.get("namespace")
        if not everything and namespace != mine:  # error rows without a namespace: admins only
            continue
        if "error" in record:
            rows.append([_when(record.get("at")), namespace or "", record.get("kind", ""), record.get("question", ""),
                         "", "", "", "", "", record["error"]])
        else:
            rewards = record.get("rewards") or []
            stored = record.get("memories_stored") or []
            rows.append([
                _when(record.get("at")), namespace or "", record.get("kind", ""), record.get("question", ""),
                record.get("planner_version", ""), ", ".join(f"{r:.2f}" for r in rewards),
                f"{record.get('correct', 0)}/{len(rewards)}",
                f"{len(stored)}" + (f" ({', '.join(str(i)[:8] for i in stored)})" if stored else ""),
                record.get("seconds", ""), "",
            ])
        if len(rows) >= RECENT_SIGNALS:
            break
    return rows


def queue_view(ctx: AppContext, request: gr.Request | None) -> tuple[str, list[list]]:
    everything = _sees_everything(ctx, request) and ctx.users is not None
    all_items = ctx.queue.items(skip_damaged=True)
    own = ctx.namespace_of(request)
    items = all_items if everything else [i for i in all_items if i.namespace == own]
    rows = [
        [datetime.fromtimestamp(i.at).strftime("%Y-%m-%d %H:%M"), i.user, i.run_id, i.question,
         i.label_before, i.label_after, i.right_answer or "", i.comment or ""]
        for i in reversed(items)
    ]
    whose = "in all namespaces" if everything else "from you"
    text = f"**{len(items)}** feedback items {whose} are in the queue ({escape_markdown(ctx.queue.where)})."
    if ctx.learner is not None and _sees_everything(ctx, request):
        text += " " + _what_waits(ctx)
    elif ctx.learner is None:
        text += " Nothing reads them while test-time learning is off."
    if _sees_everything(ctx, request):
        text += "".join(f"\n\n⚠️ {escape_markdown(problem[0].upper() + problem[1:])}." for problem in ctx.queue.damage())
    return text, rows


def load_learning(ctx: AppContext, request: gr.Request | None):
    """Everything the view shows: status, controls' visibility, versions, signals, queue length, queue."""
    queue_text, queue_rows = queue_view(ctx, request)
    return (status_markdown(ctx, request), gr.update(visible=_may_steer(ctx, request)), version_rows(ctx),
            signal_rows(ctx, request), queue_text, queue_rows)


# -- what the buttons do ---------------------------------------------------------------------------
def _refusal(ctx: AppContext, request: gr.Request | None) -> str | None:
    if ctx.read_only:
        return "⚠️ This is a read-only demo: it never learns, so there is nothing to pause or roll back."
    if ctx.learner is None:
        return "⚠️ Test-time learning is switched off. " + SWITCH_ON
    if not _may_steer(ctx, request):
        return ADMIN_ONLY
    return None


def pause_learning(ctx: AppContext, request: gr.Request | None) -> tuple[str, str]:
    """Returns (action result, status)."""
    refused = _refusal(ctx, request)
    if refused:
        return refused, status_markdown(ctx, request)
    ctx.learner.pause()
    log.info("test-time learning paused by %s", ctx.user_of(request))
    return ("⏸️ Paused. A signal or update already under way finishes first; nothing new starts until you resume.",
            status_markdown(ctx, request))


def resume_learning(ctx: AppContext, request: gr.Request | None) -> tuple[str, str]:
    refused = _refusal(ctx, request)
    if refused:
        return refused, status_markdown(ctx, request)
    ctx.learner.resume()
    log.info("test-time learning resumed by %s", ctx.user_of(request))
    return "▶️ Resumed: pending signals are processed again.", status_markdown(ctx, request)


def rollback_learning(ctx: AppContext, number: float | int | None, request: gr.Request | None) -> tuple[str, str, list[list]]:
    """Returns (action result, status, versions)."""
    from training.ttrl.versions import VersionError

    refused = _refusal(ctx, request)
    if refused:
        return refused, status_markdown(ctx, request), version_rows(ctx)
    if number is None or number != number or int(number) != number or number < 0:
        return ("⚠️ Choose a version number (0 is the base model; the table lists the versions).",
                status_markdown(ctx, request), version_rows(ctx))
    number = int(number)
    status = ctx.learner.status()
    if number == status.current_version:
        return f"v{number:04d} is already the current Planner; nothing changed.", status_markdown(ctx, request), version_rows(ctx)
    try:
        version = ctx.learner.rollback(number)
    except VersionError as exc:
        return f"⚠️ Not rolled back: {escape_markdown(exc)}", status_markdown(ctx, request), version_rows(ctx)
    except Exception as exc:  # loading the version into the app failed; the pointer may have moved
        log.exception("rollback to %s failed", number)
        return (f"⚠️ The learner now points at v{number:04d}, but the app could not load it: {escape_markdown(exc)}. "
                "The app keeps answering with the Planner it had; see the server log.",
                status_markdown(ctx, request), version_rows(ctx))
    log.info("Planner rolled back to %s by %s", version.name, ctx.user_of(request))
    busy = (" An update that was under way is discarded when it finishes, because it started from another version."
            if status.updates_running else "")
    return (f"↩️ Rolled back: the app now answers with Planner {version.name}, and learning continues from it.{busy}",
            status_markdown(ctx, request), version_rows(ctx))


# -- the view --------------------------------------------------------------------------------------
def build_learning_tab(ctx: AppContext):
    """Returns (on_load function, its outputs) for page load."""
    status = gr.Markdown(elem_id="learning-status")
    with gr.Row():
        refresh = gr.Button("Refresh", size="sm", elem_id="refresh-learning")
    with gr.Row(visible=_may_steer(ctx, None) and ctx.users is None, elem_id="learning-controls") as controls:
        pause = gr.Button("⏸️ Pause learning", size="sm", elem_id="learning-pause")
        resume = gr.Button("▶️ Resume learning", size="sm", elem_id="learning-resume")
        rollback_to = gr.Number(label="Roll back to version (0 = base model)", precision=0, minimum=0,
                                elem_id="rollback-version", scale=2)
        rollback = gr.Button("↩️ Roll back", size="sm", elem_id="rollback")
    action_result = gr.Markdown(elem_id="learning-action-result")

    gr.Markdown("### Planner versions\nEach update of the Planner (GRPO on rollouts, or RFT on verified successful "
                "plans, as `ttrl.learner` says) makes a version; the canary decides whether it is promoted.")
    versions = gr.Dataframe(headers=VERSION_COLUMNS, interactive=False, wrap=True, max_height=320,
                            elem_id="versions-table",
                            column_widths=["10%", "7%", "5%", "10%", "6%", "12%", "5%", "5%", "5%", "5%", "30%"])
    gr.Markdown(f"### Recent signals\nThe last {RECENT_SIGNALS} questions learned from: rollout rewards, how many "
                "rollouts were correct, and the memories stored.")
    signals = gr.Dataframe(headers=SIGNAL_COLUMNS, interactive=False, wrap=True, max_height=360,
                           elem_id="signals-table",
                           column_widths=["10%", "7%", "8%", "26%", "6%", "8%", "5%", "10%", "5%", "15%"])
    gr.Markdown("### Feedback queue")
    length = gr.Markdown(elem_id="queue-length")
    table = gr.Dataframe(headers=QUEUE_COLUMNS, interactive=False, wrap=True, max_height=420, elem_id="queue-table",
                         column_widths=["11%", "7%", "9%", "31%", "9%", "9%", "12%", "12%"])

    def load(request: gr.Request):
        return load_learning(ctx, request)

    def do_pause(request: gr.Request):
        return pause_learning(ctx, request)

    def do_resume(request: gr.Request):
        return resume_learning(ctx, request)

    def do_rollback(number, request: gr.Request):
        return rollback_learning(ctx, number, request)

    outputs = [status, controls, versions, signals, length, table]
    refresh.click(load, None, outputs)
    pause.click(do_pause, None, [action_result, status])
    resume.click(do_resume, None, [action_result, status])
    rollback.click(do_rollback, [rollback_to], [action_result, status, versions])
    return load, outputs
