"""StepMesh's tests/fserver/test_fserver.py logic on pslite.fserver, CPU
tensors (run by pslite-run, every role): each worker pushes three float32
tensors of shape [1, 8192] and pulls one; the server answers each batch with
sum(batch), as StepMesh's does, and checks that every pushed tensor came as
float32 of shape [1, 8192]; the workers check allclose and the answer's
dtype and shape. Argument: torch (torch tensors both sides), numpy (numpy
arrays both sides: the server's get_batch gives numpy arrays) or cuda (as
StepMesh's test: the worker's tensors on its GPU, STEPMESH_GPU or 0; the
server must get them on its GPU)."""

import os
import sys

import numpy

import pslite
import pslite.fserver as f

STEPS = 5
SHAPE = (1, 8192)
MODULE = {"torch": "torch", "cuda": "torch", "numpy": "numpy"}


def server(kind):
    for _ in range(STEPS):
        res = f.get_batch()
        for r in res:
            comm_id, batch, _ = r
            for t in batch:
                assert tuple(t.shape) == SHAPE, "server got shape %s" % (tuple(t.shape),)
                assert str(t.dtype).endswith("float32"), "server got dtype %s" % t.dtype
                assert type(t).__module__.split(".")[0] == MODULE[kind], type(t)
                if kind == "cuda":
                    assert t.is_cuda, "server got a %s tensor, not one on its GPU" % t.device
            f.respond([sum(batch)], comm_id)
    print("fserver_dtype server: %d steps answered, float32 %s tensors" % (STEPS, kind),
          flush=True)


def worker(kind):
    w = f._state["worker"]
    for step in range(STEPS):
        if kind != "numpy":
            import torch
            dev = "cuda:%s" % os.environ.get("STEPMESH_GPU", "0") if kind == "cuda" else "cpu"
            push = [torch.rand(SHAPE, dtype=torch.float32, device=dev) for _ in range(3)]
            pull = [torch.zeros(SHAPE, dtype=torch.float32, device=dev)]
        else:
            push = [numpy.random.rand(*SHAPE).astype(numpy.float32) for _ in range(3)]
            pull = [numpy.zeros(SHAPE, dtype=numpy.float32)]
        h = f.push_pull(push, [0, 1, 2], pull, [0])
        t = w.wait(h)
        want = sum(push)
        if kind != "numpy":
            import torch
            assert pull[0].device == push[0].device
            assert torch.allclose(want, pull[0]), "step %d: %r, expected %r" % (
                step, pull[0][0, :3], want[0, :3])
        else:
            assert numpy.allclose(want, pull[0]), "step %d: %r, expected %r" % (
                step, pull[0][0, :3], want[0, :3])
        assert t["described"] == [("float32", SHAPE)], t["described"]
    print("fserver_dtype worker %d: OK, %d steps allclose (%s)" % (pslite.rank(), STEPS, kind),
          flush=True)


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else "torch"
    f.TENSOR_KIND = MODULE[kind]
    f.init()
    if pslite.is_server():
        server(kind)
    elif pslite.is_worker():
        worker(kind)
    f.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
