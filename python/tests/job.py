"""One node of a pslite job from Python, for every role (run by
tests/integration/python_job.sh under pslite-run): the servers sum what the
workers push, the workers check every pull against the sums."""

import array
import sys

import pslite
import roles

KEYS = [1, 2, 2**63 + 5]  # server 0 holds the first two, server 1 (of 2) the last
PER_KEY = 4


def server():
    store = {}

    def handle(srv, req):
        n = req.num_vals // len(req.keys) if req.keys else 0
        if req.push:
            vals = array.array("f")
            vals.frombytes(req.vals())
            for i, k in enumerate(req.keys):
                cur = store.setdefault(k, [0.0] * n)
                for j in range(n):
                    cur[j] += vals[i * n + j]
        if req.pull:
            out = array.array("f")
            for k in req.keys:
                out.extend(store.get(k, [0.0] * PER_KEY))
            req.respond(req.keys, out)
        else:
            req.respond()

    s = pslite.KVServer(handle)
    if pslite.role() == pslite.JOINT:
        return s  # this process's worker finalizes (roles.main)
    pslite.finalize()
    s.close()


def worker():
    r = pslite.rank()
    g = pslite.group_size()
    if g > 1:
        assert pslite.instance_rank() == r * g + pslite.instance(), "instance rank"
        print("python worker %d: instance %d of %d, instance rank %d"
              % (r, pslite.instance(), g, pslite.instance_rank()), flush=True)
    # the node queries: ps-lite's key ranges and rank <-> id mappings
    S = pslite.num_servers()
    q = (2**64 - 1) // S
    for i in range(S):
        assert pslite.server_key_range(i) == (q * i, q * (i + 1)), pslite.server_key_range(i)
        assert pslite.id_to_rank(pslite.server_rank_to_id(i)) == i, "server rank %d" % i
    assert pslite.id_to_rank(pslite.worker_rank_to_id(r)) == r, "worker rank %d" % r
    assert pslite.is_worker() and not pslite.is_scheduler()
    try:
        pslite.server_key_range(S)
        raise AssertionError("server_key_range(%d) of %d servers did not raise" % (S, S))
    except pslite.PsliteError:
        pass
    w = pslite.KVWorker()
    base = [float(i + 1) for i in range(len(KEYS) * PER_KEY)]
    mine = array.array("f", [(r + 1) * x for x in base])
    w.wait(w.push(KEYS, mine))
    pslite.barrier(pslite.GROUP_WORKERS)
    total = sum(i + 1 for i in range(pslite.num_workers()))
    want = [total * x for x in base]
    out = array.array("f", [0.0] * len(base))
    got = w.wait(w.pull(KEYS, out))
    assert got == len(base), "pull received %d values, expected %d" % (got, len(base))
    assert list(out) == want, "pull: %s, expected %s" % (list(out), want)
    pslite.barrier(pslite.GROUP_WORKERS)
    # push-pull: each adds its values once more, and gets at least its own sum
    out2 = bytearray(len(base) * 4)
    w.wait(w.pushpull(KEYS, mine, out2))
    got2 = array.array("f")
    got2.frombytes(bytes(out2))
    assert all(g >= t for g, t in zip(got2, want)), "pushpull: %s" % list(got2)
    # bad input: errors that name the problem, and the worker goes on
    try:
        w.pull(KEYS, b"\0" * 48)
        raise AssertionError("a pull into read-only bytes was accepted")
    except ValueError as e:
        assert "writable" in str(e), e
    small = array.array("f", [0.0])
    try:
        w.wait(w.pull(KEYS, small))
        raise AssertionError("a pull into a 1-value buffer succeeded")
    except pslite.PsliteError as e:
        print("worker %d: too small a buffer: %s" % (r, e))
    try:
        import numpy as np
    except ImportError:
        print("worker %d: numpy not installed: its case skipped" % r)
    else:
        pslite.barrier(pslite.GROUP_WORKERS)
        a = np.zeros(len(base), dtype=np.float32)
        w.wait(w.pull(KEYS, a))
        assert a.min() > 0, a
        print("worker %d: numpy pull OK" % r)
        try:
            w.pull(KEYS, np.zeros(len(base), dtype=np.float64))
            raise AssertionError("a float64 array was taken by a float32 worker")
        except TypeError as e:
            print("worker %d: wrong dtype: %s" % (r, e))
    try:
        import torch
    except ImportError:
        print("worker %d: torch not installed: its case skipped" % r)
    else:
        # CPU tensors, zero-copy both ways: push adds the tensor once more,
        # so the pull that follows sees at least the sums checked above
        pslite.barrier(pslite.GROUP_WORKERS)
        t = torch.tensor(list(mine), dtype=torch.float32)
        w.wait(w.push(KEYS, t))
        pslite.barrier(pslite.GROUP_WORKERS)
        out_t = torch.zeros(len(base), dtype=torch.float32)
        w.wait(w.pull(KEYS, out_t))
        assert all(g > x for g, x in zip(out_t.tolist(), want)), out_t
        for bad, err in ((torch.zeros(2 * len(base))[::2], ValueError),
                         (torch.zeros(len(base), dtype=torch.float64), TypeError)):
            try:
                w.pull(KEYS, bad)
                raise AssertionError("pull took a bad tensor")
            except err as e:
                print("worker %d: bad tensor: %s" % (r, e))
        print("worker %d: torch push/pull OK" % r)
    van = pslite.van_name()
    w.close()
    pslite.finalize()
    print("python worker %d: OK (van %s)" % (r, van))



if __name__ == "__main__":
    sys.exit(roles.main(server, worker))
