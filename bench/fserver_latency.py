"""Attention-FFN communication latency, the way StepMesh's
tests/benchmark/bmk_comm_latency_multiserver.py measures it, on
pslite.fserver (run every role with pslite-run; needs torch):

    pslite-run -s 2 -w 2 -- python3 bench/fserver_latency.py [--iters N] ...

Each attention worker, every step, pushes a token tensor (TOKENS x DIM
bfloat16) and a token-count tensor to every FFN server and pulls one tensor
of the same shape from each server, rotating over three micro-batches of
buffers with StepMesh's key scheme; each server answers every worker's
batch from one return buffer (respond_vec), and the workers check that what
arrived is that buffer's first rows (seeded per server). Every REPORT
steps a worker prints the step latency (mean, p50, p99, max, in ms) and,
from fetch_trace, the time to send the request and from the first answer
to completion (pslite's traces hold the worker's side only: StepMesh's
server slots are the send time, so the server's time is counted as
"net"). --device cuda puts the tensors on the GPU (STEPMESH_GPU).
"""

import argparse
import os
import statistics
import sys

import torch

import pslite
import pslite.fserver as f


def push_key(private, mb, worker):  # StepMesh's gen_push_key
    return private + (mb << 8) + (worker << 16)


def pull_key(private, mb, worker):  # StepMesh's gen_pull_key
    return private + (mb << 8) + (worker << 16) + (1 << 24)


def ret_buffer(server_rank, a, dev):
    """Server server_rank's return buffer: the same on the worker, which
    checks the answers against it."""
    g = torch.Generator(device=dev).manual_seed(1000 + server_rank)
    return torch.rand([a.tokens * 4, a.dim], dtype=torch.bfloat16, device=dev, generator=g)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=2000, help="steps per worker")
    ap.add_argument("--report", type=int, default=500, help="steps per printed line")
    ap.add_argument("--tokens", type=int, default=128, help="tokens per tensor")
    ap.add_argument("--dim", type=int, default=1024, help="values per token (StepMesh: 7168)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (STEPMESH_GPU's device)")
    a = ap.parse_args()
    dev = a.device
    if dev == "cuda":
        dev = "cuda:%d" % int(os.environ.get("STEPMESH_GPU", "0"))
    f.init()
    if pslite.is_scheduler():
        f.stop()
        return 0
    nserver, nworker = pslite.num_servers(), pslite.num_workers()
    if pslite.is_server():
        ret = ret_buffer(pslite.rank(), a, dev)
        f.barrier(True, False)
        for _ in range(a.iters):
            batches = f.get_batch()  # one per worker
            f.respond_vec(ret, [b[1][0].view(torch.bfloat16).reshape(-1, a.dim)
                                for b in batches], [b[0] for b in batches])
        rank = pslite.rank()
        f.stop()
        print("fserver_latency server %d: %d steps answered" % (rank, a.iters), flush=True)
        return 0

    r = pslite.rank()
    push, push_keys, pull, pull_keys = [], [], [], []
    for mb in range(3):
        t = [torch.rand([a.tokens, a.dim], dtype=torch.bfloat16, device=dev),
             torch.full([1], a.tokens, dtype=torch.int32, device=dev)]
        push.append(t)
        push_keys.append([push_key(i, mb, r) for i in range(len(t))])
        o = [torch.empty([a.tokens, a.dim], dtype=torch.bfloat16, device=dev)
             for _ in range(nserver)]
        pull.append(o)
        pull_keys.append([pull_key(i, mb, r) for i in range(len(o))])
    f.barrier(False, True)
    steps, send, answer = [], [], []
    for it in range(a.iters):
        mb = it % 3
        start = f.get_nanosecond()
        h = f.push_pull(push[mb], push_keys[mb], pull[mb], pull_keys[mb])
        handlers = f.get_all_handlers(h)
        f.wait(h)
        end = f.get_nanosecond()
        for tr in (f.fetch_trace(x) for x in handlers):
            send.append((tr[1] - tr[0]) / 1e6)
            answer.append((tr[7] - tr[6]) / 1e6)
        steps.append((end - start) / 1e6)
        if len(steps) == a.report or it == a.iters - 1:
            print("fserver_latency worker %d (%d servers, %d workers, van %s, %s): "
                  "mean=%.3fms p50=%.3fms p99=%.3fms max=%.3fms; request send p50=%.3fms, "
                  "answer to completion p50=%.3fms"
                  % (r, nserver, nworker, pslite.van_name(), dev, statistics.mean(steps),
                     pct(steps, 50), pct(steps, 99), max(steps), pct(send, 50),
                     pct(answer, 50)), flush=True)
            steps, send, answer = [], [], []
    # pull tensor i came from server i (StepMesh's routing): its return
    # buffer's first rows
    for s in range(nserver):
        want = ret_buffer(s, a, dev)[0:a.tokens]
        for mb in range(min(3, a.iters)):
            assert torch.equal(pull[mb][s], want), "step data from server %d is wrong" % s
    f.stop()
    print("fserver_latency worker %d: OK, %d steps" % (r, a.iters), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
