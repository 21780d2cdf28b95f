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
any writable buffer, any dtype, bfloat16 included), with their dtype and
shape in the message's meta, as StepMesh does. A server's get_batch() gives
each pushed tensor as a torch tensor of the dtype and shape the worker
pushed (a numpy array without torch, bytes without either; flat uint8 for a
buffer with no dtype, such as a bytearray). CUDA tensors are taken as they are (by device pointer:
pslite stages them through pinned host memory where the van cannot move
GPU memory), ordered with PyTorch's current stream as StepMesh's
need_event says (push_pull: True by default, respond: False). A server whose
PyTorch sees a GPU gets the pushed tensors on it, as StepMesh's FFN server
does: device STEPMESH_GPU (an ordinal) where set, else PyTorch's current
device; SERVER_DEVICE ("cpu", "cuda:1") chooses another. Registered receive
buffers stay where they are; a push copied into a CUDA one is ordered with
PyTorch's current stream at init (respond's need_event does not change it).
"""

import os

import time

import pslite

_state = {"role": None, "worker": None, "server": None, "pending": [], "traces": {},
          "recv": {}}


def init():
    """Start this node (DMLC_ROLE and the other DMLC_* variables) and pass the
    start-up barrier of workers and servers, as StepMesh's init does."""
    pslite.start()
    if pslite.is_worker():
        # StepMesh's routing: every push tensor to every server, the pull
        # tensors split in equal groups, group i from server i
        _state["worker"] = pslite.AFWorker(dtype="bytes", broadcast=True)
    elif pslite.is_server():
        _state["server"] = pslite.AFServer(dtype="bytes")
        for (r, k), c in _state["recv"].items():  # registered before init
            _state["server"].register_recv_buffer(c, r, k)
    _state["role"] = pslite.role()
    if not pslite.is_scheduler():
        pslite.barrier(pslite.GROUP_SERVERS | pslite.GROUP_WORKERS)


def push_pull(push_tensors, push_keys, pull_tensors, pull_keys, need_event=True):
    """Send one batch to the FFN servers; returns the handle for wait().
    need_event (StepMesh's): CUDA tensors are read and written after the
    work queued so far on PyTorch's current stream; False: they are ready,
    nothing is waited for."""
    return _state["worker"].push_pull(list(push_tensors), list(push_keys),
                                      list(pull_tensors), list(pull_keys),
                                      need_event=need_event)


def wait(handler, timeout_ms=10000):
    """Wait until the batch's pull tensors are filled. Raises PsliteError if
    it failed, or (errno ETIMEDOUT) if it is not done within timeout_ms
    (StepMesh stops the process there; pslite lets the caller decide: the
    batch goes on, wait for it again). None or < 0: no limit."""
    t = _state["worker"].wait(handler, timeout_ms)
    if t:
        traces = _state["traces"]
        traces[handler] = [t["submit_ns"], t["sent_ns"], t["answered_ns"], t["completed_ns"]]
        while len(traces) > 1024:  # (a caller that never fetches them)
            del traces[next(iter(traces))]


def get_all_handlers(handler):
    """The handlers a batch was split into: StepMesh gives one per server;
    a pslite batch is one request, whatever its servers."""
    return [handler]


def fetch_trace(handler):
    """A waited batch's times (CLOCK_MONOTONIC ns) in StepMesh's 8 slots: 0
    request started, 1 request sent, 2-5 the server's (received, delivered,
    processed, answer sent), 6 answer received, 7 answer delivered. pslite
    measures the worker's side only: slots 2-5 hold the sent time, so a
    server's time counts as network time in StepMesh's breakdown. [] for a
    handler that was not waited for."""
    t = _state["traces"].pop(handler, None)
    if not t:
        return []
    submit, sent, answered, completed = t
    # (a first answer can come before the last message of the batch is
    # handed over, which is when "sent" is taken)
    sent = min(sent, answered)
    return [submit, sent, sent, sent, sent, sent, answered, completed]


# Where a server's get_batch puts pushed tensors: None (a GPU when PyTorch
# sees one, see the module's text), or a torch device name such as "cpu".
SERVER_DEVICE = None

# What get_batch gives pushed tensors as: "torch", "numpy", or None: torch
# where it imports, else numpy, else bytes.
TENSOR_KIND = None


def _kind():
    if TENSOR_KIND:
        return TENSOR_KIND
    for kind in ("torch", "numpy"):
        try:
            __import__(kind)
            return kind
        except ImportError:
            pass
    return None


def _server_device():
    """The torch device a server's pushed tensors go to, None for host."""
    if _kind() != "torch":
        return None
    if SERVER_DEVICE is not None:
        return None if SERVER_DEVICE == "cpu" else SERVER_DEVICE
    import torch
    if not torch.cuda.is_available():
        return None
    gpu = os.environ.get("STEPMESH_GPU")
    return "cuda:%d" % (int(gpu) if gpu else torch.cuda.current_device())


def _as_tensor(data, desc):
    kind = _kind()
    if not kind:
        return data
    t = pslite.as_tensor(data, desc, kind)
    dev = _server_device()
    return t.to(dev) if dev else t


def register_recv_buffer(tensor, worker_ranks, push_keys):
    """Where pushes go on this server (StepMesh's RegisterRecvTensor): the
    contiguous tensor (CPU or CUDA) is cut into len(worker_ranks) equal
    chunks, and chunk i receives the push of key push_keys[i] from worker
    rank worker_ranks[i], straight from the van where it places data
    (ucx, fabric, ibverbs), else copied there by pslite on arrival;
    get_batch() gives the chunk, viewed as the pushed dtype and shape."""
    if len(worker_ranks) == 0 or len(worker_ranks) != len(push_keys):
        raise ValueError("register_recv_buffer: %d ranks for %d keys (one rank per key, "
                         "at least one)" % (len(worker_ranks), len(push_keys)))
    if not tensor.is_contiguous():
        raise ValueError("register_recv_buffer: a non-contiguous tensor: pass "
                         "tensor.contiguous()")
    import torch
    flat = tensor.view(-1).view(torch.uint8)
    if flat.numel() % len(worker_ranks):
        raise ValueError("register_recv_buffer: %d bytes do not split evenly into %d chunks"
                         % (flat.numel(), len(worker_ranks)))
    chunk = flat.numel() // len(worker_ranks)
    for i, (r, k) in enumerate(zip(worker_ranks, push_keys)):
        c = flat[i * chunk:(i + 1) * chunk]
        _state["recv"][(int(r), int(k))] = c
        if _state["server"] is not None:
            _state["server"].register_recv_buffer(c, int(r), int(k))


def _into(rank, key, data, desc):
    """The push of (rank, key), of the dtype and shape desc: its registered
    chunk filled with data, else a new tensor (or the bytes without torch
    and numpy)."""
    chunk = _state["recv"].get((rank, key))
    if chunk is None:
        return _as_tensor(data, desc)
    if hasattr(data, "data_ptr") and data.data_ptr() == chunk.data_ptr():
        return pslite.as_tensor(data, desc, "torch")  # pslite put it there
    import torch
    if len(data) > chunk.numel():
        raise ValueError("worker %d pushed %d bytes for key %d, its registered receive "
                         "buffer holds %d" % (rank, len(data), key, chunk.numel()))
    if data:
        chunk[:len(data)].copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    return pslite.as_tensor(chunk[:len(data)], desc, "torch")


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
        out.append((b, [_into(rank, k, d, desc) for (k, d), desc in zip(b.push, b.described)],
                    [k for k, _ in b.push]))
    return out


def respond(tensors, handler, need_event=False):
    """Answer a batch with one tensor per pull key, in the batch's order.
    need_event (StepMesh's, False by default as there): CUDA tensors are
    read after the work queued so far on PyTorch's current stream; without
    it the caller says they are ready."""
    _state["server"].respond(list(tensors), handler, need_event=need_event)


def respond_vec(ret_buffer, tensors_vec, handler_vec):
    """Answer several batches from one buffer: batch i gets the first
    len(tensors_vec[i]) rows of ret_buffer (StepMesh's respond_vec)."""
    if len(tensors_vec) != len(handler_vec):
        raise ValueError("respond_vec: %d tensors for %d handlers"
                         % (len(tensors_vec), len(handler_vec)))
    for i, (t, h) in enumerate(zip(tensors_vec, handler_vec)):
        # (one buffer: ordering the first answer orders them all, as StepMesh does)
        respond([ret_buffer[0:t.shape[0]].contiguous()], h, need_event=(i == 0))


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
