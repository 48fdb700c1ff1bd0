"""The prompts the roles send, as named templates read top to bottom: system texts, user-turn
templates, and the small pure functions that render them into chat messages."""
