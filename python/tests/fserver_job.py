"""StepMesh's test_fserver.py on pslite.fserver (run by pslite-run, every
role; needs torch): each attention worker pushes three bfloat16 tensors a
step and pulls one; the FFN server answers each worker's batch with the sum
of its three tensors; the workers check every answer. The server receives
key 2 into buffers it registered (register_recv_buffer) and answers every
other step with respond_vec; the workers check fetch_trace and
get_all_handlers."""

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
        nw = pslite.num_workers()
        reg = torch.zeros((nw,) + SHAPE, dtype=torch.bfloat16)  # one chunk per worker
        f.register_recv_buffer(reg, list(range(nw)), [2] * nw)
        chunk = reg[0].numel() * reg.element_size()
        for step in range(STEPS):
            sums, handlers = [], []
            for w, (handler, tensors, keys) in enumerate(f.get_batch()):
                assert keys == [0, 1, 2], keys
                assert tensors[2].data_ptr() == reg.data_ptr() + w * chunk, \
                    "key 2 of worker %d did not land in its registered chunk" % w
                parts = [t.view(torch.bfloat16).reshape(SHAPE) for t in tensors]
                sums.append((parts[0] + parts[1] + parts[2]).contiguous())
                handlers.append(handler)
            if step % 2:
                for s, h in zip(sums, handlers):
                    f.respond([s], h)
            else:  # one buffer, every batch answered with its first rows
                for s, h in zip(sums, handlers):
                    f.respond_vec(s, [s], [h])
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
        assert f.get_all_handlers(h) == [h]
        tr = f.fetch_trace(h)
        assert len(tr) == 8 and tr[0] <= tr[1] == tr[5] <= tr[6] <= tr[7], tr
        assert t0 <= tr[0] and tr[3] <= f.get_nanosecond(), (t0, tr)
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
