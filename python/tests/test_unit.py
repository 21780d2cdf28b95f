"""Unit tests of the Python package's buffer handling (no job, no library
needed): run by pytest, or as a script (python_job.sh runs it that way)."""
import array
import ctypes
import os
import sys
import threading
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pslite  # noqa: E402
from pslite import _view  # noqa: E402


def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc as e:
        return str(e)
    raise AssertionError("%s%r did not raise %s" % (fn.__name__, args, exc.__name__))


def test_buffers():
    a = array.array("f", [1.0, 2.0, 3.0])
    cbuf, n = _view(a, 4, True, "float32")
    assert n == 3
    assert ctypes.addressof(cbuf) == a.buffer_info()[0]  # zero-copy
    assert _view(bytearray(8), 4, True)[1] == 2
    assert _view(b"", 4, False)[1] == 0
    assert "writable" in raises(ValueError, _view, b"12345678", 4, True)
    assert "whole number" in raises(ValueError, _view, bytearray(6), 4, True)


def test_numpy():
    try:
        import numpy as np
    except ImportError:
        return
    a = np.arange(8, dtype=np.float32)
    cbuf, n = _view(a, 4, True, "float32")
    assert n == 8 and ctypes.addressof(cbuf) == a.ctypes.data
    assert "float64 array" in raises(TypeError, _view, a.astype(np.float64), 4, True, "float32")
    assert "contiguous" in raises(ValueError, _view, a[::2], 4, True, "float32")
    assert _view(a.astype(np.int8), 1, True, "bytes")[1] == 8  # bytes take anything


def test_torch():
    try:
        import torch
    except ImportError:
        return
    t = torch.arange(6, dtype=torch.float32)
    cbuf, n = _view(t, 4, True, "float32")
    assert n == 6 and ctypes.addressof(cbuf) == t.data_ptr()  # zero-copy
    assert cbuf._tensor is t  # kept alive as long as the view
    assert "contiguous()" in raises(ValueError, _view, t[::2], 4, True, "float32")
    assert "int64 tensor" in raises(TypeError, _view, t.long(), 4, True, "float32")
    assert "device meta" in raises(ValueError, _view, torch.empty(4, device="meta"), 4, True)
    assert "whole number" in raises(ValueError, _view, torch.zeros(3, dtype=torch.int8), 4, True)
    assert _view(torch.zeros(0), 4, True) == (None, 0)


class _CudaLike:
    """What _view reads of a CUDA torch tensor (no GPU here): its device
    address must reach C as it is, with mem 1 and the device's index."""
    dtype = None
    device = type("Device", (), {"type": "cuda", "index": 1})()

    def data_ptr(self):
        return 0x7f0000001000

    def is_contiguous(self):
        return True

    def numel(self):
        return 8

    def element_size(self):
        return 4

    def record_stream(self, stream):
        self.recorded = getattr(self, "recorded", []) + [stream]


def test_cuda_tensor_view():
    from pslite import _Kv, _Tensor, _make_kv, _tensors, _vptr, _mem
    t = _CudaLike()
    buf, n = _view(t, 4, True)
    assert n == 8 and _mem(buf) == (1, 1) and _vptr(buf).value == t.data_ptr()
    kv = _make_kv([3], t, None, 4)
    assert (kv.mem, kv.dev, kv.vals, kv.num_vals) == (1, 1, t.data_ptr(), 8)
    arr, refs = _tensors([t], [5], 4, True, "pull")
    assert (arr[0].mem, arr[0].dev, arr[0].vals, arr[0].len) == (1, 1, t.data_ptr(), 8)
    # the C structs' layout: two ints after the last pointer-sized field,
    # then the tensor's dtype, ndim and 8 int64 dimensions
    assert ctypes.sizeof(_Kv) == 48 and ctypes.sizeof(_Tensor) == 112


def test_cuda_stream():
    """A call with a CUDA tensor is ordered with PyTorch's current stream of
    the tensor's device; need_event=False is PSL_CUDA_STREAM_NONE; host
    buffers set no stream. (A stand-in torch module: no GPU here.)"""
    from pslite import _cuda_stream, _with_stream, _STREAM_NONE
    asked = []

    def current_stream(dev):
        asked.append(dev)
        return types.SimpleNamespace(cuda_stream=0x5000 + dev)

    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(current_stream=current_stream)
    saved = sys.modules.get("torch")
    sys.modules["torch"] = fake
    try:
        dbuf, _ = _view(_CudaLike(), 4, True)
        hbuf, _ = _view(bytearray(8), 4, True)
        assert _cuda_stream([hbuf, dbuf]).value == 0x5001 and asked == [1]
        assert _cuda_stream([dbuf], need_event=False).value == _STREAM_NONE
        assert _cuda_stream([hbuf]) is None
        fake.cuda.current_stream = lambda dev: types.SimpleNamespace(cuda_stream=0)
        assert _cuda_stream([dbuf]).value is None  # torch's default stream: pslite's default
    finally:
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved
    seen = []
    mu = threading.Lock()
    setter = lambda obj, st: seen.append((obj, st.value)) or 0  # noqa: E731
    assert _with_stream(mu, setter, "w", types.SimpleNamespace(value=7),
                        lambda: seen.append("call") or 3) == 3
    assert seen == [("w", 7), "call"]
    seen.clear()
    assert _with_stream(mu, setter, "w", None, lambda: 4) == 4 and seen == []


def test_record_stream():
    """A pull into a CUDA tensor that pslite orders with a stream marks the
    tensor as used on that stream (record_stream), so that PyTorch does not
    lend its memory to another stream's work before the queued copy into
    it has run; nothing is marked for PSL_CUDA_STREAM_NONE (the copy was
    waited for) or host memory. (A stand-in torch module: no GPU here; the
    GPU case is gpu_order.py's case 6.)"""
    from pslite import _record_stream, _STREAM_NONE
    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(current_stream=lambda dev: ("stream of", dev))
    saved = sys.modules.get("torch")
    sys.modules["torch"] = fake
    try:
        t = _CudaLike()
        dbuf, _ = _view(t, 4, True)
        _record_stream(dbuf, ctypes.c_void_p(None))  # the legacy default stream
        _record_stream(dbuf, ctypes.c_void_p(0x5001))
        assert t.recorded == [("stream of", 1)] * 2
        _record_stream(dbuf, ctypes.c_void_p(_STREAM_NONE))
        _record_stream(dbuf, None)
        _record_stream(_view(bytearray(8), 4, True)[0], ctypes.c_void_p(0x5001))
        assert len(t.recorded) == 2
    finally:
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved


def test_batch_server_recv_stream():
    """An AFServer's respond sets the stream its tensors belong to for that
    call only: its GPU receive buffers stay ordered with the stream current
    when they were registered. (Before, respond(need_event=False), fserver's
    default, left PSL_CUDA_STREAM_NONE set, and every later push into a
    registered GPU buffer was copied synchronously on the receive thread.)"""
    from pslite import _STREAM_NONE
    calls = []
    lib = types.SimpleNamespace(
        psl_kv_batch_server_new=lambda *a: 0,
        psl_kv_batch_server_set_cuda_stream=lambda s, st: calls.append(("stream", st.value)) or 0,
        psl_kv_batch_server_recv_buffer=lambda *a: calls.append(("register", a[2])) or 0,
        psl_kv_batch_respond=lambda s, i, arr, n: calls.append(("respond", i)) or 0)
    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(
        current_stream=lambda dev: types.SimpleNamespace(cuda_stream=0x5000 + dev))
    saved, saved_lib = sys.modules.get("torch"), pslite._lib
    sys.modules["torch"], pslite._lib = fake, lambda: lib
    try:
        s = pslite.AFServer()
        s.register_recv_buffer(_CudaLike(), 0, 7)
        assert calls == [("stream", 0x5001), ("register", 7)]
        calls.clear()
        batch = types.SimpleNamespace(id=3, pull=[(9, None)])
        s.respond([_CudaLike()], batch, need_event=False)
        assert calls == [("stream", _STREAM_NONE), ("respond", 3), ("stream", 0x5001)]
        calls.clear()
        s.respond([_CudaLike()], batch)
        assert calls == [("stream", 0x5001), ("respond", 3), ("stream", 0x5001)]
        calls.clear()
        s.respond([bytearray(32)], batch, need_event=False)  # host: no stream set
        assert calls == [("respond", 3)]
        s._s = None  # (nothing to free)
    finally:
        pslite._lib = saved_lib
        if saved is None:
            del sys.modules["torch"]
        else:
            sys.modules["torch"] = saved


def test_fserver_recv_buffer():
    try:
        import torch
    except ImportError:
        return
    import pslite.fserver as f
    t = torch.zeros(6, dtype=torch.int16)  # 12 bytes: 3 chunks of 4
    assert "one rank per key" in raises(ValueError, f.register_recv_buffer, t, [0, 1], [5])
    assert "split evenly" in raises(ValueError, f.register_recv_buffer, t, [0] * 5, [1, 2, 3, 4, 5])
    f.register_recv_buffer(t, [0, 0, 1], [7, 8, 7])
    got = f._into(1, 7, b"\x01\x02\x03\x04", (None, None))
    assert got.data_ptr() == t.data_ptr() + 8 and t.view(torch.uint8)[8:].tolist() == [1, 2, 3, 4]
    assert "holds 4" in raises(ValueError, f._into, 0, 8, b"12345", (None, None))
    assert f._into(2, 7, b"ab", (None, None)).tolist() == [97, 98]  # not registered: a new tensor
    # the worker's dtype and shape (StepMesh's test_fserver: float32 tensors)
    one = f._into(2, 7, b"\x00\x00\x80\x3f" * 2, ("float32", (1, 2)))
    assert one.dtype == torch.float32 and tuple(one.shape) == (1, 2) and one.tolist() == [[1.0, 1.0]]
    reg = f._into(1, 7, b"\x00\x00\x80\x3f", ("float32", (1,)))
    assert reg.data_ptr() == t.data_ptr() + 8 and reg.tolist() == [1.0]
    f._state["recv"].clear()


def test_batch_registered_bytes():
    """A batch push received into a registered buffer is given as that
    buffer's first bytes, in place, whatever its dtype and length."""
    try:
        import torch
    except ImportError:
        return
    import ctypes
    import pslite
    reg = torch.zeros(8, dtype=torch.float32)  # 32 bytes, the push fills 8
    reg[:2] = 1.0
    arr = (pslite._Tensor * 1)()
    arr[0].key, arr[0].vals, arr[0].len = 5, reg.data_ptr(), 8
    req = pslite._BatchReq(id=1, sender=9, npush=1, push=arr)
    b = pslite.Batch(ctypes.pointer(req), 1, {(0, 5): (reg, reg.data_ptr(), None)})
    got = b.push[0][1]
    assert got.dtype == torch.uint8 and got.numel() == 8 and got.data_ptr() == reg.data_ptr()
    assert got.view(torch.float32).tolist() == [1.0, 1.0]
    mem = bytearray(b"abcdefgh")
    addr = ctypes.addressof((ctypes.c_char * 8).from_buffer(mem))
    arr[0].vals, arr[0].len = addr, 3
    b = pslite.Batch(ctypes.pointer(req), 1, {(0, 5): (mem, addr, None)})
    assert bytes(b.push[0][1]) == b"abc"


def test_fserver_server_device():
    """Where a server's get_batch puts pushed tensors: its GPU when PyTorch
    sees one (STEPMESH_GPU's), SERVER_DEVICE's otherwise, host for numpy."""
    try:
        import torch
    except ImportError:
        return
    import os
    import pslite.fserver as f
    kind, dev, gpu = f.TENSOR_KIND, f.SERVER_DEVICE, os.environ.pop("STEPMESH_GPU", None)
    try:
        f.TENSOR_KIND, f.SERVER_DEVICE = "torch", None
        want = "cuda:%d" % torch.cuda.current_device() if torch.cuda.is_available() else None
        assert f._server_device() == want
        if torch.cuda.is_available():
            os.environ["STEPMESH_GPU"] = "0"
            assert f._server_device() == "cuda:0"
        f.SERVER_DEVICE = "cpu"
        assert f._server_device() is None
        assert f._as_tensor(b"\x00\x00\x80\x3f", ("float32", (1,))).device.type == "cpu"
        f.SERVER_DEVICE = "cuda:1"
        assert f._server_device() == "cuda:1"
        f.TENSOR_KIND = "numpy"
        assert f._server_device() is None
    finally:
        f.TENSOR_KIND, f.SERVER_DEVICE = kind, dev
        os.environ.pop("STEPMESH_GPU", None)
        if gpu is not None:
            os.environ["STEPMESH_GPU"] = gpu


def test_tensor_describe():
    import numpy
    from pslite import _Tensor, as_tensor
    a = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
    t = _Tensor()
    t.describe(a)
    assert t.described() == ("float32", (2, 3)), t.described()
    back = as_tensor(a.tobytes(), t.described(), "numpy")
    assert back.dtype == numpy.float32 and back.shape == (2, 3) and (back == a).all()
    u = _Tensor()
    u.describe(bytearray(4))
    assert u.described() == (None, None)


def test_error_detail():
    """A failed call's exception carries the reason that names the fix (issue
    26, case 4), not only "Invalid argument"; needs the library (PSLITE_LIB)."""
    import subprocess
    try:
        pslite._lib()
    except OSError:
        return
    env = dict(os.environ, DMLC_ROLE="worker", DMLC_NUM_SERVER="abc", DMLC_NUM_WORKER="1",
               DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT="1",
               PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    code = ("import pslite\ntry:\n    pslite.start()\nexcept pslite.PsliteError as e:\n"
            "    print('ERR', e.errno, e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, timeout=60,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
    assert "ERR 22 start: DMLC_NUM_SERVER=abc: expected a positive integer" in out, out
    assert "another van" not in pslite._lib().psl_strerror(-71).decode()


def test_api_surface():
    for name in pslite.__all__:
        assert hasattr(pslite, name), name


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
            print("%s: OK" % name)
    print("test_unit.py: OK")
