"""KVWorker(timeout_ms=...) and set_timeout() in a 1+1 job (run by
pslite-run, every role; tests/integration/python_timeout.sh). The server
answers a pull of key 1 after SLOW seconds (a slow handler), any other key
at once with values equal to the key. The worker, with a 300 ms deadline,
gets PsliteError ETIMEDOUT naming server 0 well before the slow answer;
the next pull (a 5 s deadline) gets its own answer, not the late one for
key 1; with no deadline (set_timeout(0)) the slow pull completes; a bad timeout raises
ValueError."""

import array
import errno
import sys
import time

import pslite
import roles

N = 4
SLOW = 1.5


def server():
    def handle(_s, req):
        if req.pull:
            if req.keys[0] == 1:
                time.sleep(SLOW)
            req.respond(req.keys, array.array("f", [float(req.keys[0])] * N))
        else:
            req.respond()

    s = pslite.KVServer(handle, dtype="float32")
    pslite.finalize()
    s.close()


def pull(w, key, **kw):
    out = array.array("f", [0.0] * N)
    w.wait(w.pull([key], out), **kw)
    return list(out)


def worker():
    w = pslite.KVWorker(dtype="float32", timeout_ms=300)
    t0 = time.monotonic()
    try:
        pull(w, 1)
        raise AssertionError("a pull the server answers after %.1f s succeeded with a "
                             "300 ms deadline" % SLOW)
    except pslite.PsliteError as e:
        took = time.monotonic() - t0
        assert e.errno == errno.ETIMEDOUT, e
        assert took < SLOW - 0.3, "the deadline fired after %.2f s" % took
        print("python timeout worker: ETIMEDOUT after %.2f s: %s" % (took, e), flush=True)
    # queued behind the slow one at the server, whose late answer comes
    # first: key 2 gets its own
    w.set_timeout(5000)
    got = pull(w, 2)
    assert got == [2.0] * N, "pull of key 2 got %s: another request's answer" % got
    w.set_timeout(0)
    t0 = time.monotonic()
    got = pull(w, 1)
    assert got == [1.0] * N and time.monotonic() - t0 >= SLOW - 0.1, got
    for bad in (-1, 1.5, "3"):
        try:
            w.set_timeout(bad)
            raise AssertionError("set_timeout(%r) was accepted" % (bad,))
        except ValueError as e:
            assert "expected an integer >= 0" in str(e), e
    w.close()
    print("python timeout worker: OK", flush=True)
    pslite.finalize()


if __name__ == "__main__":
    sys.exit(roles.main(server, worker))
