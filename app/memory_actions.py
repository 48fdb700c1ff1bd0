"""What the Memory view's detail buttons do to the memory open in it: save edits, relabel, pin, strike
as wrong, delete, undo a change. Each takes (store, memory id, namespace, actor, summary, plan,
history id) and returns the sentence to show; the detail panel's `change` checks the page first."""

from __future__ import annotations

from memory_db import memory_key


def do_save(store, mid, space, actor, new_summary, new_plan, _):
    store.edit(mid, namespace=space, summary=new_summary, plan=new_plan, actor=actor)
    return f"Saved the edits to `{mid[:8]}`."


def do_relabel(correct: bool):
    def act(store, mid, space, actor, *_):
        store.relabel(mid, namespace=space, correct=correct, actor=actor)
        return f"`{mid[:8]}` is now a {'successful strategy' if correct else 'failure lesson'}."
    return act


def do_pin(store, mid, space, actor, *_):
    now = not store.get(mid, namespace=space).pinned
    store.pin(mid, namespace=space, pinned=now, actor=actor)
    return f"`{mid[:8]}` {'pinned: it is never evicted' if now else 'unpinned'}."


def do_strike(store, mid, space, actor, *_):
    m = store.get(mid, namespace=space)
    store.strike(memory_key(mid), namespace=space, kind="memory", title=m.question, memory_id=mid, actor=actor)
    return (f"Struck `{mid[:8]}`: it is not retrieved for new questions in this namespace; undo it from its "
            "history or the struck sources.")


def do_delete(store, mid, space, actor, *_):
    store.delete(mid, namespace=space, actor=actor)
    return f"Deleted `{mid[:8]}`; undo it from the history below."


def do_undo(store, mid, space, actor, _s, _p, history_id):
    if history_id is None:
        return "Click the change to undo in the history first."
    restored = store.undo(int(history_id), namespace=space, actor=actor)
    return f"Undid change {int(history_id)}" + (f"; `{restored.id[:8]}` restored." if restored else "; the memory is gone again.")
