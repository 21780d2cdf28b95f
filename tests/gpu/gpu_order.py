"""Issue 30's ordering cases with PyTorch on a real GPU (run by
tests/gpu/gpu_order.sh under pslite-run: 1 server, 1 worker): every case
queues its GPU work behind torch.cuda._sleep on torch's current stream and
calls pslite at once, without torch.cuda.synchronize().
  1. a kernel fills x, then push(x): the server stores the kernel's value;
  2. a queued x.clone() reads x, then pull into x: the clone has the old
     value, x the pulled one;
  3. the server answers a pull from a tensor a kernel is still writing:
     the worker gets the kernel's value;
  4. the same with a side stream (torch.cuda.Stream) made current;
  5. an AF batch: its push tensor written by a slow kernel, its pull
     tensor read by a queued clone;
  6. a pull into a tensor allocated on another stream, freed as soon as
     the pull completes (its copy still queued behind a slow kernel) and
     its memory asked for again on that stream: the new tensor keeps what
     its stream wrote (pslite marks the tensor with record_stream);
  7. an AF push into a GPU buffer the server registered, while a clone of
     that buffer is queued behind a slow kernel on the server: the clone
     has the old value, the server's later work the pushed one.
Prints "gpu_order worker: OK" when every case holds. GPU_ORDER_DEVICE=cpu
runs the same calls on CPU tensors (no kernels, no side stream): a dry run
of the script itself where there is no GPU."""

import os
import sys

import torch

import pslite
import roles

N = 1 << 22  # 4,194,304 float32 values: 16 MiB
SLEEP = int(3e8)  # cycles of torch.cuda._sleep: about 0.2 s
DEV = os.environ.get("GPU_ORDER_DEVICE", "cuda")


def slow():
    """A kernel of about 0.2 s on torch's current stream."""
    if DEV == "cuda":
        torch.cuda._sleep(SLEEP)


def server():
    store = {}

    def handle(srv, req):
        if req.push:
            store[req.keys[0]] = req.vals()
            req.respond()
        elif req.keys[0] == 3:  # case 3: from a tensor a kernel is writing
            t = torch.zeros(N, device=DEV)
            slow()
            t.fill_(7.0)
            req.respond([3], t)
        else:
            req.respond(req.keys, store[req.keys[0]])

    s = pslite.KVServer(handle)
    batch = pslite.AFServer(app_id=1)
    reg = torch.full((1024,), 3.0, device=DEV)
    batch.register_recv_buffer(reg, 0, 13)
    b = batch.get_batch(60000)
    assert b is not None, "no batch"
    got = torch.frombuffer(bytearray(b.push[0][1]), dtype=torch.float32)
    assert bool((got == 5.0).all()), "case 5: the batch's push tensor holds %s" % got[:4]
    # 7. a push into the registered buffer while a queued clone reads it
    # (queued before the answer that lets the worker push: on CPU tensors,
    # the dry run, the clone is then done before the push can arrive)
    slow()
    before = reg.clone()
    batch.respond([torch.full((b.pull[0][1],), 9.0)], b)
    b = batch.get_batch(60000)
    assert b is not None, "no batch for case 7"
    after = reg.clone()  # the server's work after it got the batch
    check("case 7 (registered buffer: the queued reader)", before, 3.0)
    check("case 7 (registered buffer: later work)", after, 7.0)
    batch.respond([torch.full((b.pull[0][1],), 9.0)], b)
    pslite.finalize()
    s.close()
    batch.close()


def check(what, t, v):
    t = t.cpu()
    bad = int((t != v).sum())
    assert bad == 0, "%s: %d of %d values are not %s (first: %s)" % (what, bad, t.numel(), v,
                                                                    t[:4].tolist())
    print("gpu_order %s: OK" % what, flush=True)


def case6(w):
    a = torch.cuda.Stream()
    with torch.cuda.stream(a):
        out = torch.zeros(N, device=DEV)
    torch.cuda.current_stream().wait_stream(a)
    slow()
    w.wait(w.pull([1], out))  # key 1 holds case 4's 4.0
    del out
    with torch.cuda.stream(a):
        again = torch.full((N,), 6.0, device=DEV)
    torch.cuda.synchronize()  # (the check's; the pull's copy has run now)
    check("case 6 (a pulled tensor freed at once)", again, 6.0)


def worker():
    w = pslite.KVWorker()
    # 1. slow kernel, then push
    x = torch.zeros(N, device=DEV)
    slow()
    x.fill_(1.0)
    w.wait(w.push([1], x))
    back = torch.zeros(N)
    w.wait(w.pull([1], back))
    check("case 1 (push after a kernel)", back, 1.0)
    # 2. queued reader, then pull into what it reads
    x = torch.full((N,), 2.0, device=DEV)
    slow()
    y = x.clone()
    w.wait(w.pull([1], x))
    z = x.clone()  # later work on the stream: the pulled value
    check("case 2 (the queued reader)", y, 2.0)
    check("case 2 (later work)", z, 1.0)
    # 3. the server's answer from a tensor a kernel writes
    r = torch.zeros(N, device=DEV)
    w.wait(w.pull([3], r))
    check("case 3 (server response)", r, 7.0)
    # 4. a side stream
    if DEV == "cuda":
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = torch.zeros(N, device=DEV)
            slow()
            x.fill_(4.0)
            w.wait(w.push([1], x))
            back = torch.zeros(N)
            w.wait(w.pull([1], back))
        check("case 4 (a side stream)", back, 4.0)
        case6(w)
    # 5. an AF batch
    af = pslite.AFWorker(app_id=1)
    p = torch.zeros(1024, device=DEV)
    q = torch.full((1024,), 2.0, device=DEV)
    slow()
    p.fill_(5.0)
    qc = q.clone()
    af.wait(af.push_pull([p], [11], [q], [12]))
    check("case 5 (batch: the queued reader)", qc, 2.0)
    check("case 5 (batch: pulled)", q, 9.0)
    # 7. a push into the server's registered buffer (the server checks)
    af.wait(af.push_pull([torch.full((1024,), 7.0, device=DEV)], [13], [q], [12]))
    af.close()
    w.close()
    pslite.finalize()
    print("gpu_order worker: OK", flush=True)


if __name__ == "__main__":
    sys.exit(roles.main(server, worker))
