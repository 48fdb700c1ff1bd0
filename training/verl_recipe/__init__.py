"""The distributed stages on verl (Ray, FSDP, vLLM rollouts): our tool, agent loops, reward and data.

Importing a submodule never starts Ray or a GPU; the launch commands are in docs/training.md.
"""
