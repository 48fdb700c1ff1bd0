"""The evaluation harness: question streams through the real agent, metrics, reports, comparisons.

Run it as `python -m backend.eval`; see `backend/eval/__main__.py` for the options.
"""
