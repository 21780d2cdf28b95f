"""StepMesh's test_fserver.py on pslite.fserver (run by pslite-run, every
role; needs torch): each attention worker pushes three bfloat16 tensors a
step and pulls one; the FFN server answers each worker's batch with the sum
of its three tensors; the workers check every answer."""

import sys

import torch

import pslite
import pslite.fserver as f

STEPS = 30
SHAPE = (16, 64)


def main():
    f.init()
    if pslite.is_scheduler():
        f.stop()
        return 0
    if pslite.is_server():
        for _ in range(STEPS):
            for handler, tensors, keys in f.get_batch():
                assert keys == [0, 1, 2], keys
                parts = [t.view(torch.bfloat16).reshape(SHAPE) for t in tensors]
                f.respond([(parts[0] + parts[1] + parts[2]).contiguous()], handler)
        print("fserver server %d: %d steps answered" % (pslite.rank(), STEPS), flush=True)
        f.barrier(True, True)
        f.stop()
        return 0
    r = pslite.rank()
    lat = []
    for step in range(STEPS):
        push = [torch.full(SHAPE, float(r + i + step % 7), dtype=torch.bfloat16)
                for i in range(3)]
        out = torch.zeros(SHAPE, dtype=torch.bfloat16)
        t0 = f.get_nanosecond()
        h = f.push_pull(push, [0, 1, 2], [out], [3])
        f.wait(h)
        lat.append((f.get_nanosecond() - t0) / 1000.0)
        want = push[0] + push[1] + push[2]
        assert torch.equal(out, want), "step %d: %r, expected %r" % (step, out[0, 0], want[0, 0])
    f.barrier(True, True)
    f.stop()
    lat.sort()
    print("fserver worker %d: OK, %d steps checked, p50 %.1f us" % (r, STEPS, lat[len(lat) // 2]),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
