"""A real chat model seen through a counter of the calls that reach it."""

from __future__ import annotations


class Counting:
    """The real model, counting the calls that reach it."""

    def __init__(self, model) -> None:
        self.model, self.calls = model, 0

    def __getattr__(self, name):
        return getattr(self.model, name)

    def generate(self, *args, **kwargs):
        self.calls += 1
        return self.model.generate(*args, **kwargs)

    def stream(self, *args, **kwargs):
        self.calls += 1
        yield from self.model.stream(*args, **kwargs)

    def choose(self, *args, **kwargs):
        self.calls += 1
        return self.model.choose(*args, **kwargs)
