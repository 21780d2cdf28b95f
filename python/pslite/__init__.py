"""pslite from Python: the node API, barriers and the KV worker and server,
through ctypes over libpslite.so (no compiled extension, so one package for
every Python 3). Calls into the library release the GIL (ctypes does), so a
thread waiting in wait() or barrier() lets the others run.

The library is found through PSLITE_LIB (a path to libpslite.so), else the
libpslite.so.0 installed with this package (make install writes where), else
the loader's libpslite.so.0. Nodes are configured by the environment exactly as
ps-lite's are (DMLC_ROLE, DMLC_PS_ROOT_URI, DMLC_NUM_WORKER, ...).

    import pslite, array
    pslite.start()
    w = pslite.KVWorker()
    w.wait(w.push([1, 2], array.array('f', [1.0, 2.0])))
    out = array.array('f', [0.0, 0.0])
    w.wait(w.pull([1, 2], out))
    w.close()
    pslite.finalize()

Values are any object with the buffer protocol (array.array, bytearray,
numpy arrays); pulls write into a writable one. See docs/python.md.
"""

import ctypes
import ctypes.util
import errno as _errno
import os
import threading

__all__ = [
    "PsliteError", "SERVER", "WORKER", "SCHEDULER", "JOINT", "GROUP_SCHEDULER", "GROUP_SERVERS",
    "GROUP_WORKERS", "GROUP_ALL", "start", "finalize", "barrier", "role", "is_worker", "use_role",
    "is_server", "is_scheduler", "rank", "node_id", "num_workers", "num_servers",
    "group_size", "instance", "instance_rank",
    "van_name", "cuda_describe", "job_lost", "KVWorker", "KVServer", "Request", "AFWorker", "AFServer", "Batch",
    "as_tensor", "KVStoreServer", "server_key_range", "server_rank_to_id", "worker_rank_to_id", "id_to_rank",
]

SERVER, WORKER, SCHEDULER, JOINT = 0, 1, 2, 3  # JOINT: DMLC_ROLE=joint
GROUP_SCHEDULER, GROUP_SERVERS, GROUP_WORKERS, GROUP_ALL = 1, 2, 4, 7

# enum psl_dtype, by the names numpy and array.array use
_DTYPES = {
    "int8": (1, 1), "int16": (2, 2), "int32": (3, 4), "int64": (4, 8),
    "uint8": (5, 1), "uint16": (6, 2), "uint32": (7, 4), "uint64": (8, 8),
    "float32": (9, 4), "float64": (10, 8), "bytes": (11, 1),
    "float16": (12, 2), "bfloat16": (13, 2), "bool": (14, 1),
}
_DTYPE_NAMES = {v[0]: k for k, v in _DTYPES.items()}
_MAX_DIMS = 8  # PSL_KV_MAX_DIMS


class PsliteError(RuntimeError):
    """A pslite call failed; errno is the (positive) error number. The message
    is the call's reason, psl_last_error() (the text of the log line that names
    what to change), or psl_strerror(errno) where the call recorded none."""

    def __init__(self, what, err, detail=None):
        self.errno = -err if err < 0 else err
        self.strerror = _lib().psl_strerror(-self.errno).decode(errors="replace")
        self.detail = detail
        super().__init__("%s: %s" % (what, detail or self.strerror))


# mem: where vals lives, PSL_MEM_HOST (0) or PSL_MEM_CUDA (1) on device dev
class _Kv(ctypes.Structure):
    _fields_ = [("keys", ctypes.POINTER(ctypes.c_uint64)), ("num_keys", ctypes.c_size_t),
                ("vals", ctypes.c_void_p), ("num_vals", ctypes.c_size_t),
                ("lens", ctypes.POINTER(ctypes.c_int)), ("mem", ctypes.c_int),
                ("dev", ctypes.c_int)]


class _KvOut(ctypes.Structure):
    _fields_ = [("vals", ctypes.c_void_p), ("cap", ctypes.c_size_t),
                ("num_vals", ctypes.c_size_t), ("lens", ctypes.POINTER(ctypes.c_int)),
                ("mem", ctypes.c_int), ("dev", ctypes.c_int)]


class _Meta(ctypes.Structure):
    _fields_ = [("cmd", ctypes.c_int), ("push", ctypes.c_bool), ("pull", ctypes.c_bool),
                ("sender", ctypes.c_int), ("timestamp", ctypes.c_int),
                ("app_id", ctypes.c_int), ("customer_id", ctypes.c_int),
                ("key", ctypes.c_uint64), ("addr", ctypes.c_uint64),
                ("val_len", ctypes.c_int), ("option", ctypes.c_int)]


class _Req(ctypes.Structure):
    _fields_ = [("meta", _Meta), ("kv", _Kv)]


_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_Req), ctypes.c_void_p)
_LIB = None
_LIB_MU = threading.Lock()


def _installed_lib():
    """The libpslite.so.0 that make install put beside this package's
    installation (_libdir.py, written by make install), if it is there."""
    try:
        from . import _libdir
    except ImportError:
        return None
    path = os.path.join(_libdir.LIBDIR, "libpslite.so.0")
    return path if os.path.exists(path) else None


def _lib():
    global _LIB
    with _LIB_MU:
        if _LIB is None:
            path = os.environ.get("PSLITE_LIB") or _installed_lib() \
                or ctypes.util.find_library("pslite") or "libpslite.so.0"
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise OSError("cannot load libpslite (%s): install pslite (make install; "
                              "ldconfig) or set PSLITE_LIB to the path of libpslite.so"
                              % e) from None
            _declare(lib)
            _LIB = lib
        return _LIB


def _declare(lib):
    c_int, c_bool, c_vp, c_sz = ctypes.c_int, ctypes.c_bool, ctypes.c_void_p, ctypes.c_size_t
    sigs = {
        "psl_start": (c_int, [c_int, c_bool]),
        "psl_start_group": (c_int, [c_int, c_bool]),
        "psl_use_instance": (c_int, [c_int, c_int]),
        "psl_dead_nodes": (c_int, [c_int, ctypes.POINTER(c_int), c_int]),
        "psl_my_address": (c_int, [ctypes.c_char_p, c_sz, ctypes.POINTER(c_int)]),
        "psl_finalize": (c_int, [c_int, c_bool]),
        "psl_barrier": (c_int, [c_int, c_int]),
        "psl_job_lost": (c_int, [ctypes.c_char_p, c_sz]),
        "psl_my_role": (c_int, []), "psl_is_server": (ctypes.c_bool, []),
        "psl_is_worker": (ctypes.c_bool, []), "psl_use_role": (c_int, [c_int]), "psl_my_rank": (c_int, []), "psl_my_id": (c_int, []),
        "psl_num_workers": (c_int, []), "psl_num_servers": (c_int, []),
        "psl_group_size": (c_int, []), "psl_my_instance": (c_int, []),
        "psl_my_instance_rank": (c_int, []),
        "psl_server_rank_to_id": (c_int, [c_int]), "psl_worker_rank_to_id": (c_int, [c_int]),
        "psl_id_to_rank": (c_int, [c_int]),
        "psl_server_key_range": (c_int, [c_int, ctypes.POINTER(ctypes.c_uint64),
                                         ctypes.POINTER(ctypes.c_uint64)]),
        "psl_strerror": (ctypes.c_char_p, [c_int]),
        "psl_last_error": (ctypes.c_char_p, []),
        "psl_van_name": (ctypes.c_char_p, []),
        "psl_cuda_describe": (c_int, [ctypes.c_char_p, c_sz]),
        "psl_kv_worker_new": (c_int, [c_int, c_int, c_int, ctypes.POINTER(c_vp)]),
        "psl_kv_worker_free": (None, [c_vp]),
        "psl_kv_push": (c_int, [c_vp, ctypes.POINTER(_Kv), c_int, c_vp, c_vp]),
        "psl_kv_pull": (c_int, [c_vp, ctypes.POINTER(ctypes.c_uint64), c_sz,
                                ctypes.POINTER(_KvOut), c_int, c_vp, c_vp]),
        "psl_kv_pushpull": (c_int, [c_vp, ctypes.POINTER(_Kv), ctypes.POINTER(_KvOut), c_int,
                                    c_vp, c_vp]),
        "psl_kv_wait": (c_int, [c_vp, c_int]),
        "psl_kv_wait_timeout": (c_int, [c_vp, c_int, c_int]),
        "psl_kv_worker_set_timeout": (c_int, [c_vp, c_int]),
        "psl_kv_server_new": (c_int, [c_int, c_int, _HANDLER, c_vp, ctypes.POINTER(c_vp)]),
        "psl_kv_server_free": (None, [c_vp]),
        "psl_kv_store_new": (c_int, [c_int, c_int, c_int, ctypes.POINTER(c_vp)]),
        "psl_kv_store_free": (None, [c_vp]),
        "psl_kv_respond": (c_int, [ctypes.POINTER(_Req), ctypes.POINTER(_Kv)]),
        "psl_kv_respond_error": (c_int, [ctypes.POINTER(_Req), c_int]),
        "psl_kv_batch_pushpull": (c_int, [c_vp, ctypes.POINTER(_Batch), c_int, c_int, c_vp,
                                          c_vp]),
        "psl_kv_batch_server_new": (c_int, [c_int, c_int, c_sz, c_vp, c_vp,
                                            ctypes.POINTER(c_vp)]),
        "psl_kv_batch_server_free": (None, [c_vp]),
        "psl_kv_batch_next": (c_int, [c_vp, c_int, ctypes.POINTER(ctypes.POINTER(_BatchReq))]),
        "psl_kv_batch_respond": (c_int, [c_vp, ctypes.c_uint64, ctypes.POINTER(_Tensor), c_sz]),
        "psl_kv_batch_respond_error": (c_int, [c_vp, ctypes.c_uint64, c_int]),
        "psl_kv_batch_server_recv_buffer": (c_int, [c_vp, c_int, ctypes.c_uint64, c_vp, c_sz,
                                                    c_int, c_int]),
        "psl_kv_worker_set_cuda_stream": (c_int, [c_vp, c_vp]),
        "psl_kv_server_set_cuda_stream": (c_int, [c_vp, c_vp]),
        "psl_kv_batch_server_set_cuda_stream": (c_int, [c_vp, c_vp]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def _check(what, rc, hint=None):
    """Raises PsliteError for rc < 0: psl_last_error(), else hint, is its
    reason."""
    if rc < 0:
        raise PsliteError(what, rc, _lib().psl_last_error().decode(errors="replace") or hint)
    return rc


def start(customer_id=0, do_barrier=True, group=False):
    """Start this node (ps-lite's Start): reads the environment, loads the van,
    registers with the scheduler and, with do_barrier, waits for every node.
    group=True with DMLC_GROUP_SIZE=G > 1: this process runs its whole
    instance group, G nodes of its role (C's psl_start_group; DMLC_RANK is
    the group's rank); use_instance() says which one the next calls act on."""
    if group:
        _check("start", _lib().psl_start_group(customer_id, do_barrier))
    else:
        _check("start", _lib().psl_start(customer_id, do_barrier))


def finalize(customer_id=0, do_barrier=True):
    """Stop this node (ps-lite's Finalize). Raises if the job lost a node."""
    _check("finalize", _lib().psl_finalize(customer_id, do_barrier))
    lost = job_lost()
    if lost:
        raise PsliteError("finalize: " + lost[1], lost[0])


def barrier(group=GROUP_ALL, customer_id=0):
    """Wait until every node of group (GROUP_* or-ed) has called it."""
    _check("barrier", _lib().psl_barrier(customer_id, group))


def job_lost():
    """None if this node's job lost no node, else (errno, the line naming it)."""
    buf = ctypes.create_string_buffer(512)
    rc = _lib().psl_job_lost(buf, len(buf))
    return None if rc == 0 else (-rc, buf.value.decode(errors="replace"))


def role():
    """SERVER, WORKER, SCHEDULER, or JOINT (DMLC_ROLE=joint: a server and a
    worker in this process; KVWorker belongs to the worker, KVServer and
    AFServer to the server)."""
    return _lib().psl_my_role()


def is_worker():
    """True on a worker, and in a joint process."""
    return bool(_lib().psl_is_worker())


def is_server():
    """True on a server, and in a joint process."""
    return bool(_lib().psl_is_server())


def use_role(r):
    """In a joint process: which node rank(), instance() and the like
    describe on the calling thread (SERVER, the default, or WORKER)."""
    _check("use_role", _lib().psl_use_role(r))


def use_instance(r, i):
    """In a process that runs its instance group (start(group=True)): the
    calling thread works for instance i of role r (SERVER or WORKER) from
    now on: rank(), instance() and the like describe it, and KVWorker,
    KVServer and KVStoreServer made next belong to it."""
    _check("use_instance(%d, %d)" % (r, i), _lib().psl_use_instance(r, i))


def dead_nodes(t_s=60):
    """ps-lite's GetDeadNodes: the node ids this node watches (the scheduler:
    servers and workers; the others: the scheduler) that were lost or, with
    heartbeats on, not heard from for more than t_s seconds."""
    cap = 64
    while True:
        ids = (ctypes.c_int * cap)()
        n = _check("dead_nodes", _lib().psl_dead_nodes(t_s, ids, cap))
        if n <= cap:
            return list(ids[:n])
        cap = n


def address():
    """(host, port) the other nodes reach this node at, once started (ps-lite's
    van()->my_node().hostname and .port)."""
    host = ctypes.create_string_buffer(256)
    port = ctypes.c_int(0)
    _check("address", _lib().psl_my_address(host, len(host), ctypes.byref(port)))
    return host.value.decode(), port.value


def is_scheduler():
    return role() == SCHEDULER


def rank():
    """This worker's or server's rank (with instance groups: the group's)."""
    return _lib().psl_my_rank()


def group_size():
    """DMLC_GROUP_SIZE: instances per worker and per server (1 without groups)."""
    return _lib().psl_group_size()


def instance():
    """This process's index in its instance group (STEPMESH_GPU's place)."""
    return _lib().psl_my_instance()


def instance_rank():
    """This instance's rank among the instances of its role."""
    return _lib().psl_my_instance_rank()


def node_id():
    return _lib().psl_my_id()


def num_workers():
    return _lib().psl_num_workers()


def num_servers():
    return _lib().psl_num_servers()


def server_key_range(server_rank):
    """(begin, end): the keys [begin, end) server server_rank holds, as
    ps-lite splits the 64-bit key space evenly ((2**64-1)//num_servers()
    each): small integer keys all go to server 0. Raises PsliteError for a
    rank that is no server's (or before start)."""
    b, e = ctypes.c_uint64(), ctypes.c_uint64()
    _check("server_key_range(%d)" % server_rank,
           _lib().psl_server_key_range(server_rank, ctypes.byref(b), ctypes.byref(e)))
    return b.value, e.value


def server_rank_to_id(r):
    """The node id of server rank r (ps-lite's ServerRankToID)."""
    return _lib().psl_server_rank_to_id(r)


def worker_rank_to_id(r):
    """The node id of worker rank r (ps-lite's WorkerRankToID)."""
    return _lib().psl_worker_rank_to_id(r)


def id_to_rank(node):
    """The rank of node id node (ps-lite's IDtoRank)."""
    return _lib().psl_id_to_rank(node)


def van_name():
    name = _lib().psl_van_name()
    return name.decode() if name else None


def cuda_describe():
    """(GPUs found, or a negative errno; one line about the CUDA runtime or
    why there is none), as pslite-info prints it."""
    buf = ctypes.create_string_buffer(1024)
    n = _lib().psl_cuda_describe(buf, len(buf))
    return n, buf.value.decode(errors="replace")


def _wait(w, ts, timeout_ms):
    """psl_kv_wait, or psl_kv_wait_timeout with a limit (the GIL is released
    while either waits: ctypes releases it around every call)."""
    if timeout_ms is None or timeout_ms < 0:
        return _lib().psl_kv_wait(w, ts)
    return _lib().psl_kv_wait_timeout(w, ts, int(timeout_ms))


def _waited(what, w, ts, timeout_ms, deadline_ms):
    """_wait; raises PsliteError ETIMEDOUT for a wait that timed out (the
    request goes on). Returns rc, and for rc < 0 the reason _check gives
    when the library recorded none (a request the worker's deadline
    failed)."""
    rc = _wait(w, ts, timeout_ms)
    if rc == -_errno.ETIMEDOUT and timeout_ms is not None and timeout_ms >= 0:
        _check("%s after %d ms" % (what, timeout_ms), rc,
               "still pending: wait for it again, or later")
    hint = None
    if rc == -_errno.ETIMEDOUT:
        hint = ("no answer within this worker's deadline (%s; set_timeout or "
                "PS_REQUEST_TIMEOUT): a WARN line names the node that did not answer" %
                ("PS_REQUEST_TIMEOUT" if deadline_ms is None else "%d ms" % deadline_ms))
    return rc, hint


def _keys(keys):
    arr = (ctypes.c_uint64 * len(keys))(*keys)
    if any(keys[i] >= keys[i + 1] for i in range(len(keys) - 1)):
        raise ValueError("keys must be sorted ascending without repeats")
    return arr


def _lens(lens):
    return None if lens is None else (ctypes.c_int * len(lens))(*lens)


def _dtype_name(buf):
    """The element type of a numpy array or torch tensor ("float32"), else None."""
    dt = getattr(buf, "dtype", None)
    if dt is None:
        return None
    return getattr(dt, "name", None) or str(dt).rpartition(".")[2]


def _check_dtype(buf, dtype):
    have = _dtype_name(buf)
    if dtype and dtype != "bytes" and have and have != dtype:
        kind = "tensor" if hasattr(buf, "data_ptr") else "array"
        raise TypeError("a %s %s where %s values are expected: convert it (.astype / .to) "
                        "or make the worker or server with dtype=%r" % (have, kind, dtype, have))


class _DevBuf:
    """A CUDA tensor's memory: its device address, never read by Python."""

    def __init__(self, t, nbytes):
        self.ptr, self.dev, self.nbytes, self._tensor = t.data_ptr(), t.device.index or 0, nbytes, t


def _torch_view(t, size, writable):
    """A PyTorch tensor's memory, zero-copy (the ctypes array, or for a CUDA
    tensor the _DevBuf, keeps t alive)."""
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError("a tensor on device %s: pslite moves CPU and CUDA tensors: pass "
                         "tensor.cpu()" % t.device)
    if not t.is_contiguous():
        raise ValueError("a non-contiguous tensor (shape %s, strides %s): pass "
                         "tensor.contiguous()" % (tuple(t.shape), tuple(t.stride())))
    nbytes = t.numel() * t.element_size()
    if nbytes % size:
        raise ValueError("a tensor of %d bytes is not a whole number of %d-byte values"
                         % (nbytes, size))
    if t.device.type == "cuda":
        return (_DevBuf(t, nbytes) if nbytes else None), nbytes // size
    cbuf = (ctypes.c_char * nbytes).from_address(t.data_ptr()) if nbytes else None
    if cbuf is not None:
        cbuf._tensor = t
    return cbuf, nbytes // size


# PSL_CUDA_STREAM_NONE: no ordering, the data is ready (need_event=False)
_STREAM_NONE = (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1


def _cuda_stream(cbufs, need_event=True):
    """The CUDA stream that the CUDA tensors among the views cbufs belong
    to, as pslite takes it (include/pslite.h): PyTorch's current stream of
    their device (its cuda_stream; 0, the default stream, is pslite's
    default too), or PSL_CUDA_STREAM_NONE when need_event is false
    (StepMesh's meaning: the caller says the data is ready). None when no
    view is on a GPU: nothing to set."""
    dev = next((c.dev for c in cbufs if isinstance(c, _DevBuf)), None)
    if dev is None:
        return None
    if not need_event:
        return ctypes.c_void_p(_STREAM_NONE)
    import torch
    return ctypes.c_void_p(torch.cuda.current_stream(dev).cuda_stream or None)


def _record_stream(cbuf, stream):
    """A pull (or an AF batch) into a CUDA tensor completes before its copy
    into the tensor has run: the copy is ordered before the later work of
    the stream the pull named. The tensor may be freed then; record_stream
    keeps PyTorch's allocator from lending its memory to work on another
    stream (the one it was allocated on, when that is not the current one)
    until that stream has passed the copy, as torch.distributed does for
    NCCL."""
    if isinstance(cbuf, _DevBuf) and stream is not None and stream.value != _STREAM_NONE:
        import torch
        cbuf._tensor.record_stream(torch.cuda.current_stream(cbuf.dev))


def _with_stream(mu, set_stream, obj, stream, call, restore=None):
    """call(), with obj's CUDA stream set to stream first when it is not
    None, and set back to restore after it when restore is not None; mu
    keeps the setting, the call and the restoring together."""
    if stream is None:
        return call()
    with mu:
        _check("set_cuda_stream", set_stream(obj, stream))
        try:
            return call()
        finally:
            if restore is not None:
                _check("set_cuda_stream", set_stream(obj, restore))


def _view(buf, size, writable, dtype=None):
    """buf's memory as a ctypes array, zero-copy where buf is writable, and
    its number of values: any buffer-protocol object or a CPU torch tensor."""
    _check_dtype(buf, dtype)
    if hasattr(buf, "data_ptr") and hasattr(buf, "is_contiguous"):
        return _torch_view(buf, size, writable)
    try:
        mv = memoryview(buf).cast("B")
    except TypeError as e:
        raise ValueError("%s: pslite needs one contiguous buffer (numpy: "
                         "numpy.ascontiguousarray)" % e) from None
    if mv.nbytes % size:
        raise ValueError("a buffer of %d bytes is not a whole number of %d-byte values"
                         % (mv.nbytes, size))
    if writable and mv.readonly:
        raise ValueError("pull needs a writable buffer (array.array, bytearray, numpy array)")
    if writable or not mv.readonly:
        cbuf = (ctypes.c_char * mv.nbytes).from_buffer(mv) if mv.nbytes else None
    else:
        cbuf = ctypes.create_string_buffer(mv.tobytes(), mv.nbytes)
    return cbuf, mv.nbytes // size


def _vptr(cbuf):
    if isinstance(cbuf, _DevBuf):
        return ctypes.c_void_p(cbuf.ptr)
    return ctypes.cast(cbuf, ctypes.c_void_p) if cbuf else None


def _mem(cbuf):
    """(mem, dev) of a view: (1, device) for a CUDA tensor, else (0, 0)."""
    return (1, cbuf.dev) if isinstance(cbuf, _DevBuf) else (0, 0)


def _make_kv(keys, vals, lens, size, dtype=None):
    """A struct psl_kv over keys, vals and lens (kept alive by the struct)."""
    cbuf, n = _view(vals, size, False, dtype)
    kv = _Kv(_keys(keys), len(keys), _vptr(cbuf), n, _lens(lens), *_mem(cbuf))
    kv._buf = cbuf
    return kv


class KVWorker:
    """ps-lite's KVWorker<Val>: push, pull and push-pull by key; each returns
    a timestamp for wait(). A pull's output buffer is written when wait()
    returns for it (keep it until then: the worker holds a reference).
    timeout_ms: the deadline of its requests (set_timeout)."""

    def __init__(self, app_id=0, customer_id=0, dtype="float32", timeout_ms=None):
        if dtype not in _DTYPES:
            raise ValueError("dtype %r: one of %s" % (dtype, ", ".join(_DTYPES)))
        self._dt, self._size = _DTYPES[dtype]
        self._dtname = dtype
        self._w = ctypes.c_void_p()
        _check("KVWorker", _lib().psl_kv_worker_new(app_id, customer_id, self._dt,
                                                    ctypes.byref(self._w)))
        self._held = {}
        self._mu = threading.Lock()
        self._deadline = None  # ms, None: PS_REQUEST_TIMEOUT's
        if timeout_ms is not None:
            try:
                self.set_timeout(timeout_ms)
            except BaseException:
                self.close()
                raise

    def set_timeout(self, timeout_ms):
        """The deadline of this worker's requests from now on: one not
        complete timeout_ms after it was made fails, and wait() raises
        PsliteError (errno ETIMEDOUT) naming the node that did not answer.
        0: no deadline. The default is PS_REQUEST_TIMEOUT (seconds, 300).
        C's psl_kv_worker_set_timeout."""
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise ValueError("timeout_ms=%r: expected an integer >= 0 (milliseconds; 0 for "
                             "no deadline)" % (timeout_ms,))
        _check("set_timeout(%d)" % timeout_ms,
               _lib().psl_kv_worker_set_timeout(self._w, timeout_ms))
        self._deadline = timeout_ms

    def _ordered(self, cbufs, call, need_event=True, out=()):
        """call() ordered with PyTorch's current stream when a CUDA tensor
        is among cbufs (pslite reads and writes it after the work queued
        there, and that stream's later work sees what a pull wrote). out:
        the views a pull writes into, marked as used on that stream."""
        stream = _cuda_stream(cbufs, need_event)
        ret = _with_stream(self._mu, _lib().psl_kv_worker_set_cuda_stream, self._w, stream,
                           call)
        if ret >= 0:
            for cbuf in out:
                _record_stream(cbuf, stream)
        return ret

    def _out(self, out):
        cbuf, n = _view(out, self._size, True, self._dtname)
        return _KvOut(_vptr(cbuf), n, 0, None, *_mem(cbuf)), cbuf

    def push(self, keys, vals, lens=None, cmd=0):
        kv = _make_kv(keys, vals, lens, self._size, self._dtname)
        return _check("push", self._ordered([kv._buf], lambda: _lib().psl_kv_push(
            self._w, ctypes.byref(kv), cmd, None, None)))

    def pull(self, keys, out, cmd=0):
        karr = _keys(keys)
        o, refs = self._out(out)
        ts = _check("pull", self._ordered([refs], lambda: _lib().psl_kv_pull(
            self._w, karr, len(keys), ctypes.byref(o), cmd, None, None), out=[refs]))
        self._held[ts] = (o, refs, out)
        return ts

    def pushpull(self, keys, vals, out, lens=None, cmd=0):
        kv = _make_kv(keys, vals, lens, self._size, self._dtname)
        o, refs = self._out(out)
        ts = _check("pushpull", self._ordered([kv._buf, refs], lambda: _lib().psl_kv_pushpull(
            self._w, ctypes.byref(kv), ctypes.byref(o), cmd, None, None), out=[refs]))
        self._held[ts] = (o, refs, out)
        return ts

    def wait(self, ts, timeout_ms=None):
        """Wait for request ts; returns the number of values a pull received.
        With timeout_ms, raises PsliteError (errno ETIMEDOUT) if it is still
        pending then: it goes on (keep its buffers), wait for it again."""
        rc, hint = _waited("request %d" % ts, self._w, ts, timeout_ms, self._deadline)
        held = self._held.pop(ts, None)
        _check("request %d" % ts, rc, hint)
        return held[0].num_vals if held else 0

    def close(self):
        if self._w:
            _lib().psl_kv_worker_free(self._w)
            self._w = ctypes.c_void_p()
            self._held.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Request:
    """One request as a KVServer's handler sees it: cmd, push, pull, sender,
    timestamp, keys (a list), vals (bytes, the pushed values), lens (list or
    None). Answer it exactly once: respond() or respond_error()."""

    def __init__(self, ptr, size, dtype=None, server=None):
        self._p, self._size, self._dtname, self._server = ptr, size, dtype, server
        m, kv = ptr.contents.meta, ptr.contents.kv
        self.cmd, self.push, self.pull = m.cmd, m.push, m.pull
        self.sender, self.timestamp = m.sender, m.timestamp
        self.keys = [kv.keys[i] for i in range(kv.num_keys)]
        self.num_vals = kv.num_vals
        self.lens = [kv.lens[i] for i in range(kv.num_keys)] if kv.lens else None
        self._vals_ptr = kv.vals

    def vals(self):
        """The pushed values as bytes."""
        n = self.num_vals * self._size
        return ctypes.string_at(self._vals_ptr, n) if n else b""

    def respond(self, keys=None, vals=None, lens=None):
        """Answer: nothing for a push; keys and values (copied) for a pull."""
        if self._p is None:
            raise RuntimeError("request already answered")
        if keys is None:
            rc = _lib().psl_kv_respond(self._p, None)
        else:
            kv = _make_kv(keys, vals, lens, self._size, self._dtname)
            p = self._p
            if self._server is None:
                rc = _lib().psl_kv_respond(p, ctypes.byref(kv))
            else:  # a CUDA tensor: read after PyTorch's current stream's work
                rc = _with_stream(self._server._mu, _lib().psl_kv_server_set_cuda_stream,
                                  self._server._s, _cuda_stream([kv._buf]),
                                  lambda: _lib().psl_kv_respond(p, ctypes.byref(kv)))
        self._p = None
        _check("respond", rc)

    def respond_error(self, errno_value):
        """Fail the worker's request with errno_value (a positive errno)."""
        if self._p is None:
            raise RuntimeError("request already answered")
        rc = _lib().psl_kv_respond_error(self._p, -abs(errno_value))
        self._p = None
        _check("respond_error", rc)


class KVServer:
    """ps-lite's KVServer<Val> with a Python handler(server, request), called
    on a pslite receive thread; it must answer each request once (an
    exception in it answers with EIO)."""

    def __init__(self, handler, app_id=0, dtype="float32"):
        if dtype not in _DTYPES:
            raise ValueError("dtype %r: one of %s" % (dtype, ", ".join(_DTYPES)))
        self.dtype, self.size = dtype, _DTYPES[dtype][1]
        self._handler = handler
        self._cb = _HANDLER(self._call)
        self._s = ctypes.c_void_p()
        self._mu = threading.Lock()
        _check("KVServer", _lib().psl_kv_server_new(app_id, _DTYPES[dtype][0], self._cb, None,
                                                    ctypes.byref(self._s)))

    def _call(self, _s, req, _arg):
        r = Request(req, self.size, self.dtype, self)
        try:
            self._handler(self, r)
        except Exception as e:  # the worker must hear of it, not hang
            import sys
            print("pslite: KVServer handler raised %r; answering with EIO" % (e,),
                  file=sys.stderr)
            if r._p is not None:
                r.respond_error(5)

    def close(self):
        if self._s:
            _lib().psl_kv_server_free(self._s)
            self._s = ctypes.c_void_p()


class KVStoreServer:
    """The common parameter server in one line (ps-lite's
    KVServerDefaultHandle, in C): pushes are stored per key, summed
    (mode "sum": added element by element) or replaced ("overwrite"); pulls
    answer what each key holds. A pull of a key never pushed raises
    PsliteError (ENOENT) at the worker. Close it after finalize()."""

    _MODES = {"sum": 0, "overwrite": 1}

    def __init__(self, app_id=0, dtype="float32", mode="sum"):
        if dtype not in _DTYPES:
            raise ValueError("dtype %r: one of %s" % (dtype, ", ".join(_DTYPES)))
        if mode not in self._MODES:
            raise ValueError("mode %r: \"sum\" or \"overwrite\"" % (mode,))
        self._s = ctypes.c_void_p()
        _check("KVStoreServer(dtype=%r, mode=%r)" % (dtype, mode), _lib().psl_kv_store_new(
            app_id, _DTYPES[dtype][0], self._MODES[mode], ctypes.byref(self._s)))

    def close(self):
        if self._s:
            _lib().psl_kv_store_free(self._s)
            self._s = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------- Attention-FFN batches --

class _Tensor(ctypes.Structure):
    _fields_ = [("key", ctypes.c_uint64), ("vals", ctypes.c_void_p), ("len", ctypes.c_size_t),
                ("received", ctypes.c_size_t), ("mem", ctypes.c_int), ("dev", ctypes.c_int),
                ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * _MAX_DIMS)]

    def describe(self, buf):
        """buf's dtype and shape (numpy arrays, torch tensors) into the
        tensor, so that they travel with it; other buffers go flat."""
        name, shape = _dtype_name(buf), getattr(buf, "shape", None)
        if name in _DTYPES and name != "bytes":
            self.dtype = _DTYPES[name][0]
            if shape is not None and 0 < len(shape) <= _MAX_DIMS:
                self.ndim = len(shape)
                for i, d in enumerate(shape):
                    self.shape[i] = int(d)

    def described(self):
        """(dtype name or None, shape tuple or None) the tensor carries."""
        shape = tuple(self.shape[i] for i in range(self.ndim)) if self.ndim else None
        return _DTYPE_NAMES.get(self.dtype), shape


class _Times(ctypes.Structure):
    _fields_ = [("submit_ns", ctypes.c_uint64), ("sent_ns", ctypes.c_uint64),
                ("answered_ns", ctypes.c_uint64), ("completed_ns", ctypes.c_uint64)]


class _Batch(ctypes.Structure):
    _fields_ = [("push", ctypes.POINTER(_Tensor)), ("npush", ctypes.c_size_t),
                ("pull", ctypes.POINTER(_Tensor)), ("npull", ctypes.c_size_t),
                ("times", _Times)]


class _BatchReq(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint64), ("sender", ctypes.c_int), ("cmd", ctypes.c_int),
                ("timestamp", ctypes.c_int), ("npush", ctypes.c_size_t),
                ("push", ctypes.POINTER(_Tensor)), ("npull", ctypes.c_size_t),
                ("pull", ctypes.POINTER(_Tensor))]


def _tensors(bufs, keys, size, writable, what, dtype=None):
    if len(bufs) != len(keys):
        raise ValueError("%s: %d tensors but %d keys" % (what, len(bufs), len(keys)))
    arr = (_Tensor * len(bufs))()
    refs = []
    for i, (b, k) in enumerate(zip(bufs, keys)):
        cbuf, n = _view(b, size, writable, dtype)
        refs.append(cbuf)
        arr[i].key, arr[i].len = k, n
        arr[i].vals = _vptr(cbuf)
        arr[i].describe(b)
        arr[i].mem, arr[i].dev = _mem(cbuf)
    return arr, refs


class AFWorker:
    """An attention worker (StepMesh's ZBatchPushPull): push_pull() sends
    several tensors to the FFN servers and pulls the answers into the pull
    tensors, zero-copy both ways; wait() returns the batch's timestamps."""

    def __init__(self, app_id=0, customer_id=0, dtype="float32", broadcast=False,
                 timeout_ms=None):
        self._kv = KVWorker(app_id, customer_id, dtype, timeout_ms)
        self._size, self._dtname = self._kv._size, dtype
        self._flags = 1 if broadcast else 0
        self._held = {}

    def set_timeout(self, timeout_ms):
        """The deadline of this worker's batches (KVWorker.set_timeout)."""
        self._kv.set_timeout(timeout_ms)

    def push_pull(self, push_tensors, push_keys, pull_tensors, pull_keys, cmd=0,
                  need_event=True):
        """Start one batch; returns a handle for wait(). The tensors (any
        buffer; pull ones writable) must stay alive and unchanged until then.
        CUDA tensors are read and written after the work queued so far on
        PyTorch's current stream, whose later work sees the pulled values;
        need_event=False (StepMesh's) skips that: they are ready."""
        push, r1 = _tensors(push_tensors, push_keys, self._size, False, "push", self._dtname)
        pull, r2 = _tensors(pull_tensors, pull_keys, self._size, True, "pull", self._dtname)
        b = _Batch(push, len(push_keys), pull, len(pull_keys))
        ts = _check("push_pull", self._kv._ordered(r1 + r2, lambda: _lib().psl_kv_batch_pushpull(
            self._kv._w, ctypes.byref(b), cmd, self._flags, None, None), need_event, r2))
        self._held[ts] = (b, push, pull, r1, r2, push_tensors, pull_tensors)
        return ts

    def wait(self, handle, timeout_ms=None):
        """Wait for a batch; returns its times (ns, CLOCK_MONOTONIC) and the
        values each pull tensor received. With timeout_ms, raises PsliteError
        (errno ETIMEDOUT) if it is still pending then; wait for it again."""
        rc, hint = _waited("batch %d" % handle, self._kv._w, handle, timeout_ms,
                           self._kv._deadline)
        held = self._held.pop(handle, None)
        _check("batch %d" % handle, rc, hint)
        if held is None:
            return {}
        t = held[0].times
        return {"submit_ns": t.submit_ns, "sent_ns": t.sent_ns, "answered_ns": t.answered_ns,
                "completed_ns": t.completed_ns,
                "received": [held[2][i].received for i in range(held[0].npull)],
                # the answers' dtype names and shapes, as their server sent them
                "described": [held[2][i].described() for i in range(held[0].npull)]}

    def close(self):
        self._kv.close()
        self._held.clear()


def _bytes_of(buf, n):
    """The first n bytes of a registered receive buffer, in place: a torch
    tensor's as a flat uint8 tensor (whatever its dtype), else a memoryview."""
    if hasattr(buf, "data_ptr"):
        import torch
        return buf.reshape(-1).view(torch.uint8)[:n]
    return memoryview(buf).cast("B")[:n]


class Batch:
    """A whole batch from one worker, as AFServer.get_batch() gives it: id,
    sender, cmd, push (a list of (key, bytes)), pull (a list of (key, room in
    values)), described (per push: the worker's (dtype name, shape), None
    where it gave none), tensors() (the pushes as arrays of those dtypes and
    shapes). Answer once with AFServer.respond()."""

    def __init__(self, req, size, regs=None):
        r = req.contents
        self.id, self.sender, self.cmd = r.id, r.sender, r.cmd
        rank = (r.sender - 9) // 2  # a worker group's rank (its id is 9 + 2 x rank)
        self.push = []
        self.described = [r.push[i].described() for i in range(r.npush)]
        for i in range(r.npush):
            t, n = r.push[i], r.push[i].len * size
            reg = (regs or {}).get((rank, t.key))
            if reg is not None and reg[1] == t.vals:  # in its registered buffer
                self.push.append((t.key, _bytes_of(reg[0], n)))
            else:
                self.push.append((t.key, ctypes.string_at(t.vals, n) if n else b""))
        self.pull = [(r.pull[i].key, r.pull[i].len) for i in range(r.npull)]

    def tensors(self, kind="numpy"):
        """The pushes as numpy arrays (kind "numpy") or torch tensors ("torch")
        of the dtype and shape each worker pushed (flat uint8 where it gave
        none), copies except for a push in a registered torch buffer."""
        return [as_tensor(d, desc, kind) for (_, d), desc in zip(self.push, self.described)]


def as_tensor(data, desc, kind="numpy"):
    """bytes (or a uint8 torch tensor) as an array of desc = (dtype name,
    shape): kind "numpy" or "torch"; flat uint8 where desc names no dtype."""
    name, shape = desc
    name = name or "uint8"
    if kind == "torch":
        import torch
        if hasattr(data, "data_ptr"):
            t = data.view(torch.uint8)
        else:
            t = torch.frombuffer(bytearray(data), dtype=torch.uint8) if len(data) else \
                torch.empty(0, dtype=torch.uint8)
        t = t.view(getattr(torch, name))
    else:
        import numpy
        if hasattr(data, "data_ptr"):
            data = data.numpy()
        t = numpy.frombuffer(bytearray(data), dtype=numpy.uint8).view(
            "bool" if name == "bool" else name)
    return t.reshape(shape) if shape is not None else t


class AFServer:
    """An FFN server's side: get_batch() blocks for the next whole batch,
    respond() answers it (any order, from any thread)."""

    def __init__(self, app_id=0, dtype="float32", max_tensors=0):
        if dtype not in _DTYPES:
            raise ValueError("dtype %r: one of %s" % (dtype, ", ".join(_DTYPES)))
        self._size, self._dtname = _DTYPES[dtype][1], dtype
        self._s = ctypes.c_void_p()
        self._regs = {}
        self._mu = threading.Lock()
        # the stream of the GPU receive buffers (pslite's default, the
        # legacy default stream, until one is registered); respond sets
        # its own and then this one again
        self._recv_stream = ctypes.c_void_p(None)
        _check("AFServer", _lib().psl_kv_batch_server_new(app_id, _DTYPES[dtype][0], max_tensors,
                                                          None, None, ctypes.byref(self._s)))

    def get_batch(self, timeout_ms=-1):
        """The next batch, or None after timeout_ms (< 0: wait for ever);
        raises PsliteError (ESHUTDOWN) once the node finalizes. A push that
        arrived in a registered receive buffer is given as that buffer (its
        first bytes), not copied."""
        req = ctypes.POINTER(_BatchReq)()
        rc = _lib().psl_kv_batch_next(self._s, timeout_ms, ctypes.byref(req))
        if rc == -_errno.ETIMEDOUT:
            return None
        _check("get_batch", rc)
        return Batch(req, self._size, self._regs)

    def register_recv_buffer(self, buf, worker_rank, key):
        """Pushes of key from the worker of rank worker_rank land in buf (a
        writable buffer or a contiguous torch tensor, CPU or CUDA), straight
        from the van where it can (StepMesh's RegisterRecvBuffer); buf is
        kept alive here. get_batch then gives those pushes as buf. A push
        pslite copies into a CUDA buf is ordered with PyTorch's current
        stream at this call (the last registration's), whatever streams
        respond() is given: that stream's later work sees the values."""
        cbuf, n = _view(buf, 1, True)
        mem, dev = _mem(cbuf)
        stream = _cuda_stream([cbuf])
        if stream is not None:  # copies into it: ordered with this stream
            with self._mu:
                _check("set_cuda_stream",
                       _lib().psl_kv_batch_server_set_cuda_stream(self._s, stream))
                self._recv_stream = stream
        _check("register_recv_buffer", _lib().psl_kv_batch_server_recv_buffer(
            self._s, worker_rank, key, _vptr(cbuf), n, mem, dev))
        ptr = cbuf.ptr if isinstance(cbuf, _DevBuf) else ctypes.addressof(cbuf)
        self._regs[(worker_rank, key)] = (buf, ptr, cbuf)

    def respond(self, tensors, batch, need_event=True):
        """Answer batch with one tensor per pull key, in the batch's order.
        CUDA tensors are read after the work queued so far on PyTorch's
        current stream; need_event=False (StepMesh's) says they are ready."""
        keys = [k for k, _ in batch.pull]
        arr, refs = _tensors(tensors, keys, self._size, False, "respond", self._dtname)
        _check("respond", _with_stream(
            self._mu, _lib().psl_kv_batch_server_set_cuda_stream, self._s,
            _cuda_stream(refs, need_event),
            lambda: _lib().psl_kv_batch_respond(self._s, batch.id, arr, len(keys)),
            self._recv_stream))

    def respond_error(self, batch, errno_value):
        _check("respond_error", _lib().psl_kv_batch_respond_error(self._s, batch.id,
                                                                 -abs(errno_value)))

    def close(self):
        if self._s:
            _lib().psl_kv_batch_server_free(self._s)
            self._s = ctypes.c_void_p()
