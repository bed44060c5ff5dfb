"""Snapshots: a run's state as bytes, and back.

`capture` takes the engine state of an interpreter; `format` packs it (header, engine document,
graph outline, user blobs) and checks what it reads before anything is decoded; `restore` rebuilds
an interpreter from it; `fingerprint` and `migrate` tie a snapshot to its graph and move it onto an
edited one; `panic` and `codecs` carry exceptions and user objects; `node_state` is the run state
nodes keep. Nothing here knows where the bytes are stored.
"""
