"""StepMesh's fserver calls on pslite, for attention workers and FFN servers
written against StepMesh (``import pslite.fserver as f``):

    f.init()                                     # start, by DMLC_ROLE
    h = f.push_pull(push_tensors, push_keys, pull_tensors, pull_keys)
    f.wait(h)                                    # worker: pull_tensors filled
    batches = f.get_batch()                      # server: one per worker
    for handler, tensors, keys in batches:
        f.respond([answer], handler)
    f.stop()

Tensors are moved as bytes, zero-copy (CPU torch tensors, numpy arrays or
any writable buffer, any dtype, bfloat16 included). A server's get_batch()
gives each pushed tensor as a flat uint8 torch tensor (bytes without torch):
view it with ``t.view(dtype).reshape(shape)``, as pslite's wire carries no
dtype or shape. CUDA tensors are taken as they are (by device pointer:
pslite stages them through pinned host memory where the van cannot move
GPU memory); the server's tensors are host memory.
"""

import time

import pslite

_state = {"role": None, "worker": None, "server": None, "pending": []}


def init():
    """Start this node (DMLC_ROLE and the other DMLC_* variables) and pass the
    start-up barrier of workers and servers, as StepMesh's init does."""
    pslite.start()
    if pslite.is_worker():
        _state["worker"] = pslite.AFWorker(dtype="bytes")
    elif pslite.is_server():
        _state["server"] = pslite.AFServer(dtype="bytes")
    _state["role"] = pslite.role()
    if not pslite.is_scheduler():
        pslite.barrier(pslite.GROUP_SERVERS | pslite.GROUP_WORKERS)


def push_pull(push_tensors, push_keys, pull_tensors, pull_keys, need_event=True):
    """Send one batch to the FFN servers; returns the handle for wait()."""
    del need_event  # (StepMesh's CUDA event: no GPU path here)
    return _state["worker"].push_pull(list(push_tensors), list(push_keys),
                                      list(pull_tensors), list(pull_keys))


def wait(handler, timeout_ms=10000):
    """Wait until the batch's pull tensors are filled. Raises PsliteError if
    it failed. (pslite does not time a wait out: a lost server fails it.)"""
    del timeout_ms
    _state["worker"].wait(handler)


def _as_tensor(data):
    try:
        import torch
    except ImportError:
        return data
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
        torch.empty(0, dtype=torch.uint8)


def get_batch():
    """Block until every worker has a batch queued and return one per worker,
    by worker rank: a list of (handler, push tensors, push keys)."""
    s = _state["server"]
    n = pslite.num_workers()
    queued = _state["pending"]
    while len({b.sender for b in queued}) < n:
        b = s.get_batch(timeout_ms=1000)
        if b is not None:
            queued.append(b)
    out = []
    for rank in range(n):
        wid = 9 + 2 * rank  # worker group rank's node id (docs/wire.md section 3)
        b = next(x for x in queued if x.sender == wid)
        queued.remove(b)
        out.append((b, [_as_tensor(d) for _, d in b.push], [k for k, _ in b.push]))
    return out


def respond(tensors, handler, need_event=False):
    """Answer a batch with one tensor per pull key, in the batch's order."""
    del need_event
    _state["server"].respond(list(tensors), handler)


def barrier(include_server, include_worker, instance_barrier=True):
    """A barrier of the servers and/or workers (every instance of a group)."""
    del instance_barrier  # pslite's barriers are instance barriers with groups
    g = (pslite.GROUP_SERVERS if include_server else 0) | \
        (pslite.GROUP_WORKERS if include_worker else 0)
    if g:
        pslite.barrier(g)


def get_nanosecond():
    return time.monotonic_ns()


def stop():
    """Finalize this node (StepMesh's stop: the final barrier of every node)."""
    pslite.finalize()
    for k in ("worker", "server"):
        if _state[k] is not None:
            _state[k].close()
            _state[k] = None
