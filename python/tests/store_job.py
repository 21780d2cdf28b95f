"""The default server (pslite.KVStoreServer: ps-lite's KVServerDefaultHandle
in C) in a job (run by pslite-run, every role). argv[1]: sum or overwrite.
Every worker pushes (rank + 1) * base to keys spread over every server's
range, one key with another length; after a barrier each pulls: the sum over
the workers (sum), or one worker's values (overwrite). A pull of a key never
pushed fails with ENOENT."""

import array
import errno
import sys

import pslite
import roles

N = 4  # values per key


def keys():
    """Two keys in each server's range, sorted."""
    out = []
    for s in range(pslite.num_servers()):
        b, _ = pslite.server_key_range(s)
        out += [b + 1, b + 7]
    return out


def server(mode):
    st = pslite.KVStoreServer(dtype="float32", mode=mode)
    pslite.finalize()
    st.close()


def worker(mode):
    r, nw = pslite.rank(), pslite.num_workers()
    w = pslite.KVWorker(dtype="float32")
    ks = keys()
    lens = [N] * len(ks)
    lens[-1] = 2  # the last key holds 2 values
    base = [float(i + 1) for i in range(sum(lens))]
    w.wait(w.push(ks, array.array("f", [(r + 1) * x for x in base]), lens=lens))
    pslite.barrier(pslite.GROUP_WORKERS)
    out = array.array("f", [0.0] * len(base))
    got = w.wait(w.pull(ks, out))
    assert got == len(base), "pulled %d values, expected %d" % (got, len(base))
    if mode == "sum":
        total = sum(i + 1 for i in range(nw))
        want = [total * x for x in base]
        assert list(out) == want, "sum: %s, expected %s" % (list(out), want)
    else:
        # each server keeps the last push it got, which may be another
        # worker's on each server: every value is one worker's, never a sum
        factors = {(i + 1) for i in range(nw)}
        got_f = [o / x for o, x in zip(out, base)]
        assert all(f in factors for f in got_f), "overwrite: %s" % list(out)
    try:
        w.wait(w.pull([ks[0] + 2], array.array("f", [0.0] * N)))
        raise AssertionError("a pull of a key never pushed succeeded")
    except pslite.PsliteError as e:
        assert e.errno == errno.ENOENT, e
    pslite.barrier(pslite.GROUP_WORKERS)
    w.close()
    pslite.finalize()
    print("store worker %d: OK (%s)" % (r, mode), flush=True)


if __name__ == "__main__":
    m = sys.argv[1] if len(sys.argv) > 1 else "sum"
    sys.exit(roles.main(lambda: server(m), lambda: worker(m)))
