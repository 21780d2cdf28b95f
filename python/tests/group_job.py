"""A whole instance group in one Python process (pslite.start(group=True),
C's psl_start_group): run by python_job.sh as a scheduler, one server
process and one worker process with DMLC_GROUP_SIZE=G. Each server
instance is a KVStoreServer (sum); worker instance i pushes to the keys of
every server group and pulls them back: it talks to server instance i of
each group only, so each pulled value is its own push, checked. The
scheduler also lists dead nodes: none."""

import array
import os

import pslite

N = 8  # values per key


def keys():
    out = []
    for s in range(pslite.num_servers()):
        b, _ = pslite.server_key_range(s)
        out += [b + 3, b + 11]
    return out


def main():
    g = int(os.environ["DMLC_GROUP_SIZE"])
    pslite.start(group=True)
    if pslite.is_scheduler():
        assert pslite.dead_nodes(30) == [], pslite.dead_nodes(30)
        pslite.finalize()
        return
    role = pslite.SERVER if pslite.is_server() else pslite.WORKER
    objs, ports = [], set()
    for i in range(g):
        pslite.use_instance(role, i)
        assert pslite.instance() == i, (pslite.instance(), i)
        host, port = pslite.address()  # each instance its own van
        assert host and port > 0 and port not in ports, (host, port, ports)
        ports.add(port)
        if role == pslite.SERVER:
            objs.append(pslite.KVStoreServer(dtype="float32", mode="sum"))
        else:
            objs.append(pslite.KVWorker(dtype="float32"))
    if role == pslite.WORKER:
        ks = keys()
        for i, w in enumerate(objs):
            vals = array.array("f", [100.0 * (i + 1) + x for x in range(N * len(ks))])
            w.wait(w.push(ks, vals))
            out = array.array("f", [0.0] * len(vals))
            w.wait(w.pull(ks, out))
            assert list(out) == list(vals), "instance %d: %s" % (i, list(out)[:4])
            print("group worker instance %d of %d: OK" % (i, g), flush=True)
    pslite.use_instance(role, 0)
    pslite.finalize()
    for o in objs:
        o.close()


if __name__ == "__main__":
    main()
