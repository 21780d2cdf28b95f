"""StepMesh's test_fserver shape in Python (run by pslite-run, every role):
each attention worker pushes three tensors per step and pulls one; the FFN
server answers each batch with the sum of its three tensors; the workers
check every answer and print the step latency. The server holds each
worker's first batch for half a second: a wait with a 50 ms limit raises
ETIMEDOUT, and the batch completes when waited for again."""

import array
import errno
import sys
import time

import pslite
import roles

STEPS = 50
N = 1024  # values per tensor


def server():
    s = pslite.AFServer()
    want = STEPS * pslite.num_workers()
    for i in range(want):
        b = s.get_batch(timeout_ms=60000)
        if i < pslite.num_workers():
            time.sleep(0.5)  # the first batches: the workers' wait times out once
        assert b is not None, "no batch within 60 s"
        parts = []
        for _, data in b.push:
            a = array.array("f")
            a.frombytes(data)
            parts.append(a)
        out = array.array("f", [x + y + z for x, y, z in zip(*parts)])
        s.respond([out], b)
    print("python af server %d: %d batches answered" % (pslite.rank(), want))
    pslite.finalize()
    s.close()


def worker():
    r = pslite.rank()
    w = pslite.AFWorker()
    lat = []
    for step in range(STEPS):
        base = float(r * 1000 + step)
        push = [array.array("f", [base + i] * N) for i in range(3)]
        out = array.array("f", [0.0] * N)
        h = w.push_pull(push, [0, 1, 2], [out], [3])
        if step == 0:
            try:
                w.wait(h, timeout_ms=50)
                raise AssertionError("a batch held for 0.5 s was done within 50 ms")
            except pslite.PsliteError as e:
                assert e.errno == errno.ETIMEDOUT, e
        t = w.wait(h)
        assert t["received"] == [N], t
        want = 3 * base + 3
        assert all(v == want for v in out), "step %d: got %r, expected %r" % (step, out[0], want)
        lat.append((t["completed_ns"] - t["submit_ns"]) / 1000.0)
    try:
        w.push_pull([array.array("f", [1.0])], [0, 1], [], [])
        raise AssertionError("two keys for one tensor were accepted")
    except ValueError as e:
        assert "1 tensors but 2 keys" in str(e), e
    lat.sort()
    van = pslite.van_name()
    w.close()
    pslite.finalize()
    print("python af worker %d: OK, %d steps checked, p50 %.1f us, p99 %.1f us (van %s)"
          % (r, STEPS, lat[len(lat) // 2], lat[int(len(lat) * 0.99)], van))



if __name__ == "__main__":
    sys.exit(roles.main(server, worker))
