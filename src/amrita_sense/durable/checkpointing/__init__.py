"""Checkpointing: when a run saves, and how it waits (or does not) for its store.

`policy` holds `Checkpointing`, the policy a run follows and the step hooks that apply it.
"""
