# Augments src/amrita_sense/durable/checkpointing/_save_at_once.py when Cython compiles it into
# `amrita_sense.durable.checkpointing._save_at_once` (the shared stem is how Cython finds this file):
# the save written at once as one C function, its checks and calls without Python frames.

cdef object _SNAPSHOT


cpdef object save_at_once(object policy, object interp)
cpdef object seal_for(object keyring, object run_id, object version)
