/* Unit tests of van_ibverbs's protocol logic (ibv_logic.c): credits, the
 * sender's rendezvous state, in-order delivery, queue pair choice under
 * DMLC_SPLIT_QP_LAG, the eager/rendezvous split and the registration cache. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ibv_logic.h"

/* ------------------------------------------------------------- credits -- */

/* Two ends of a queue pair exchanging records through simulated receive
 * queues: a sender never finds the peer's queue empty (no RNR), and credits
 * always come back, whatever the mix of traffic. */
struct end {
	struct ibv_credits cr;
	uint32_t posted; /* receive buffers posted (depth + reserve) */
	uint32_t inflight_credit_recs;
};

static void test_credits_basic(void **state)
{
	struct ibv_credits c;
	int i;
	(void)state;
	ibv_cr_init(&c, 8, 4);
	for (i = 0; i < 4; i++)
		assert_true(ibv_cr_take(&c));
	assert_false(ibv_cr_take(&c)); /* never more than the peer posted */
	assert_int_equal(ibv_cr_grant(&c, 5), -EPROTO); /* more than it could owe */
	assert_int_equal(ibv_cr_grant(&c, 2), 0);
	assert_int_equal(c.avail, 2);
	/* owed credits: CREDIT records owe nothing */
	assert_false(ibv_cr_need_update(&c));
	ibv_cr_reposted(&c, true);
	assert_int_equal(c.owed, 0);
	for (i = 0; i < 3; i++)
		ibv_cr_reposted(&c, false);
	assert_false(ibv_cr_need_update(&c)); /* 3 < 8/2 */
	ibv_cr_reposted(&c, false);
	assert_true(ibv_cr_need_update(&c));
	assert_int_equal(ibv_cr_piggyback(&c), 4);
	assert_int_equal(c.owed, 0);
	assert_false(ibv_cr_need_update(&c));
	/* depth 1: every record is given back at once */
	ibv_cr_init(&c, 1, 1);
	ibv_cr_reposted(&c, false);
	assert_true(ibv_cr_need_update(&c));
}

/* A random simulation: A sends messages to B; B answers some with FINs; each
 * side piggybacks owed credits or sends CREDIT records when told to. Records
 * are delivered after random delays. Checks: a receive buffer is always
 * there (no RNR), the reserve is never exceeded, and everything completes. */
struct rec {
	int to; /* 0: A receives, 1: B receives */
	bool credit_only;
	uint16_t credits;
};

static void test_credits_simulation(void **state)
{
	enum { DEPTH_A = 6, DEPTH_B = 16, N = 20000 };
	struct ibv_credits cr[2];
	uint32_t free_bufs[2] = {DEPTH_A + IBV_CR_RESERVE, DEPTH_B + IBV_CR_RESERVE};
	struct rec *wire = calloc(4096, sizeof(*wire));
	size_t nw = 0;
	int sent = 0, fins_owed = 0, received = 0, fins_got = 0, spins = 0;
	(void)state;

	ibv_cr_init(&cr[0], DEPTH_A, DEPTH_B);
	ibv_cr_init(&cr[1], DEPTH_B, DEPTH_A);
	srand(7);
	while ((received < N || fins_got < N / 3) && spins < 10000000) {
		int r = rand() % 4;
		spins++;
		if (r == 0 && sent < N && ibv_cr_take(&cr[0])) {
			/* A sends a message */
			assert_true(nw < 4096);
			wire[nw++] = (struct rec){.to = 1, .credits = ibv_cr_piggyback(&cr[0])};
			sent++;
		} else if (r == 1 && fins_owed && ibv_cr_take(&cr[1])) {
			assert_true(nw < 4096);
			wire[nw++] = (struct rec){.to = 0, .credits = ibv_cr_piggyback(&cr[1])};
			fins_owed--;
		} else if (r == 2 && nw) {
			/* deliver a random record, keeping per-direction order */
			size_t k = (size_t)rand() % nw, j;
			int to = wire[k].to;
			for (j = 0; j < k; j++)
				if (wire[j].to == to) {
					k = j;
					break;
				}
			{
				struct rec x = wire[k];
				memmove(&wire[k], &wire[k + 1], (nw - k - 1) * sizeof(*wire));
				nw--;
				/* a buffer must be posted: no receiver-not-ready */
				assert_true(free_bufs[x.to] > 0);
				free_bufs[x.to]--;
				assert_int_equal(ibv_cr_grant(&cr[x.to], x.credits), 0);
				if (!x.credit_only) {
					if (x.to == 1) {
						received++;
						if (received % 3 == 0)
							fins_owed++;
					} else {
						fins_got++;
					}
				}
				/* reposted at once */
				free_bufs[x.to]++;
				ibv_cr_reposted(&cr[x.to], x.credit_only);
			}
		} else if (r == 3) {
			int side;
			for (side = 0; side < 2; side++)
				if (ibv_cr_need_update(&cr[side])) {
					assert_true(nw < 4096);
					wire[nw++] = (struct rec){.to = !side, .credit_only = true,
								  .credits = ibv_cr_piggyback(
									  &cr[side])};
				}
		}
		/* the reserve covers every CREDIT record in flight */
		{
			size_t j;
			int cro[2] = {0, 0};
			for (j = 0; j < nw; j++)
				if (wire[j].credit_only)
					cro[wire[j].to]++;
			assert_true(cro[0] <= IBV_CR_RESERVE);
			assert_true(cro[1] <= IBV_CR_RESERVE);
			/* and every record in flight has a posted buffer waiting */
			{
				int inflight[2] = {0, 0};
				for (j = 0; j < nw; j++)
					inflight[wire[j].to]++;
				assert_true(inflight[0] <= (int)free_bufs[0]);
				assert_true(inflight[1] <= (int)free_bufs[1]);
			}
		}
	}
	assert_int_equal(received, N);
	assert_true(fins_got >= N / 3);
	free(wire);
}

/* ------------------------------------------------ sender's rendezvous -- */

static void test_sop(void **state)
{
	struct ibv_sop s;
	int st = 99;
	(void)state;
	/* eager: done at the send completion */
	ibv_sop_init(&s, false);
	assert_true(ibv_sop_event(&s, IBV_SOP_SENT, 0, &st));
	assert_int_equal(st, 0);
	assert_false(ibv_sop_event(&s, IBV_SOP_SENT, 0, &st)); /* exactly once */
	assert_false(ibv_sop_event(&s, IBV_SOP_FAIL, -EIO, &st));
	/* eager never takes a FIN */
	ibv_sop_init(&s, false);
	assert_false(ibv_sop_event(&s, IBV_SOP_FIN, 0, &st));
	assert_true(ibv_sop_event(&s, IBV_SOP_SENT, 0, &st));
	/* rendezvous: send then FIN */
	ibv_sop_init(&s, true);
	assert_false(ibv_sop_event(&s, IBV_SOP_SENT, 0, &st));
	assert_true(ibv_sop_event(&s, IBV_SOP_FIN, 0, &st));
	assert_int_equal(st, 0);
	/* FIN before the send completion was polled */
	ibv_sop_init(&s, true);
	assert_false(ibv_sop_event(&s, IBV_SOP_FIN, 0, &st));
	assert_false(ibv_sop_event(&s, IBV_SOP_FIN, 0, &st)); /* duplicate ignored */
	assert_true(ibv_sop_event(&s, IBV_SOP_SENT, 0, &st));
	/* the receiver could not read: the FIN's error ends it at once */
	ibv_sop_init(&s, true);
	assert_true(ibv_sop_event(&s, IBV_SOP_FIN, -ENOMEM, &st));
	assert_int_equal(st, -ENOMEM);
	assert_false(ibv_sop_event(&s, IBV_SOP_SENT, 0, &st));
	/* a failed send completion */
	ibv_sop_init(&s, true);
	assert_true(ibv_sop_event(&s, IBV_SOP_SENT, -EIO, &st));
	assert_int_equal(st, -EIO);
	assert_false(ibv_sop_event(&s, IBV_SOP_FIN, 0, &st));
	/* the link went down while waiting for the FIN */
	ibv_sop_init(&s, true);
	assert_false(ibv_sop_event(&s, IBV_SOP_SENT, 0, &st));
	assert_true(ibv_sop_event(&s, IBV_SOP_FAIL, -ECONNRESET, &st));
	assert_int_equal(st, -ECONNRESET);
	assert_false(ibv_sop_event(&s, IBV_SOP_FIN, 0, &st));
	assert_false(ibv_sop_event(&s, IBV_SOP_FAIL, -EIO, &st));
	/* FAIL with status 0 still fails */
	ibv_sop_init(&s, false);
	assert_true(ibv_sop_event(&s, IBV_SOP_FAIL, 0, &st));
	assert_int_equal(st, -EIO);
}

/* ------------------------------------------------- in-order delivery -- */

static void test_oq(void **state)
{
	struct ibv_oq q = {0};
	struct ibv_oq_ent e[6];
	int i;
	(void)state;
	memset(e, 0, sizeof(e));
	for (i = 0; i < 6; i++)
		e[i].seq = (uint64_t)i;
	/* arrive 2, 0, 1 (several queue pairs); 1 is a rendezvous still reading */
	assert_int_equal(ibv_oq_insert(&q, &e[2]), 0);
	e[2].ready = true;
	assert_null(ibv_oq_pop(&q));
	assert_int_equal(ibv_oq_insert(&q, &e[0]), 0);
	e[0].ready = true;
	assert_int_equal(ibv_oq_insert(&q, &e[1]), 0);
	assert_ptr_equal(ibv_oq_pop(&q), &e[0]);
	assert_null(ibv_oq_pop(&q)); /* 1 not ready: 2 waits */
	e[1].ready = true;
	assert_ptr_equal(ibv_oq_pop(&q), &e[1]);
	assert_ptr_equal(ibv_oq_pop(&q), &e[2]);
	assert_null(ibv_oq_pop(&q));
	/* duplicates and old numbers are protocol errors */
	e[3].ready = true;
	assert_int_equal(ibv_oq_insert(&q, &e[3]), 0);
	{
		struct ibv_oq_ent dup = {.seq = 3}, old = {.seq = 1};
		assert_int_equal(ibv_oq_insert(&q, &dup), -EPROTO);
		assert_int_equal(ibv_oq_insert(&q, &old), -EPROTO);
	}
	assert_int_equal(ibv_oq_insert(&q, &e[5]), 0);
	assert_ptr_equal(ibv_oq_pop(&q), &e[3]);
	assert_null(ibv_oq_pop(&q)); /* 4 missing */
	assert_int_equal(q.n, 1);
	assert_ptr_equal(ibv_oq_take_any(&q), &e[5]);
	assert_null(ibv_oq_take_any(&q));
	assert_int_equal(q.n, 0);
}

/* ---------------------------------------------------- queue pair choice -- */

static void test_pick_qp(void **state)
{
	struct ibv_qchoice q[3];
	unsigned rr = 0;
	int counts[3] = {0, 0, 0}, i, k;
	(void)state;
	for (i = 0; i < 3; i++)
		q[i] = (struct ibv_qchoice){.up = true, .credits = 10, .slots = 10};
	/* all able: round robin, every pair carries traffic */
	for (i = 0; i < 300; i++) {
		k = ibv_pick_qp(q, 3, &rr);
		assert_true(k >= 0 && k < 3);
		counts[k]++;
	}
	assert_int_equal(counts[0], 100);
	assert_int_equal(counts[1], 100);
	assert_int_equal(counts[2], 100);
	/* one without credits is skipped while others can post */
	q[1].credits = 0;
	for (i = 0; i < 10; i++)
		assert_int_not_equal(ibv_pick_qp(q, 3, &rr), 1);
	/* one with a queue is skipped too (its queue keeps order) */
	q[1].credits = 10;
	q[2].queued = 3;
	for (i = 0; i < 10; i++)
		assert_int_not_equal(ibv_pick_qp(q, 3, &rr), 2);
	/* none can post: the shortest queue */
	for (i = 0; i < 3; i++)
		q[i].slots = 0;
	q[0].queued = 5;
	q[1].queued = 2;
	q[2].queued = 4;
	assert_int_equal(ibv_pick_qp(q, 3, &rr), 1);
	/* a pair that is down is never chosen */
	q[1].up = false;
	assert_int_equal(ibv_pick_qp(q, 3, &rr), 2);
	q[0].up = q[2].up = false;
	assert_int_equal(ibv_pick_qp(q, 3, &rr), -1);
	assert_int_equal(ibv_pick_qp(q, 0, &rr), -1);
	/* one pair (DMLC_SPLIT_QP_LAG unset): always it */
	q[0] = (struct ibv_qchoice){.up = true};
	assert_int_equal(ibv_pick_qp(q, 1, &rr), 0);
}

/* ---------------------------------------------------- eager or rendezvous -- */

static void test_plan(void **state)
{
	uint64_t lens[4] = {8, 4096, 4, 0};
	bool rem[4], mrem = true;
	long n;
	(void)state;
	/* a 4 KiB push fits one 8.5 KiB buffer */
	n = ibv_plan(lens, 3, 200, 8704, 0, rem, &mrem);
	assert_int_equal(n, 32 + 3 * 24 + 200 + 8 + 4096 + 4);
	assert_false(rem[0] || rem[1] || rem[2]);
	assert_false(mrem);
	/* 1 MiB values go by rendezvous, keys and lens stay inline */
	lens[1] = 1 << 20;
	n = ibv_plan(lens, 4, 200, 8704, 0, rem, &mrem);
	assert_int_equal(n, 32 + 4 * 24 + 200 + 8 + 4);
	assert_false(rem[0]);
	assert_true(rem[1]);
	assert_false(rem[2]);
	assert_false(rem[3]); /* an empty segment is never read */
	/* two big ones: both out; largest first until it fits */
	{
		uint64_t l2[3] = {6000, 5000, 100};
		n = ibv_plan(l2, 3, 100, 8704, 0, rem, &mrem);
		assert_true(rem[0]);
		assert_false(rem[1]);
		assert_false(rem[2]);
		assert_true(n <= 8704);
	}
	/* rndv_min forces rendezvous */
	lens[1] = 2048;
	n = ibv_plan(lens, 3, 10, 8704, 1024, rem, &mrem);
	assert_true(rem[1]);
	assert_false(rem[0]);
	/* a meta that does not fit goes by rendezvous, the segments stay inline
	 * where they fit beside its descriptor */
	n = ibv_plan(lens, 3, 9000, 8704, 0, rem, &mrem);
	assert_true(mrem);
	assert_int_equal(n, 32 + 4 * 24 + 8 + 2048 + 4);
	assert_false(rem[0] || rem[1] || rem[2]);
	/* a meta that just fits stays inline, its segments go out */
	lens[1] = 1000;
	n = ibv_plan(lens, 3, 8704 - 32 - 3 * 24, 8704, 0, rem, &mrem);
	assert_false(mrem);
	assert_true(rem[1]);
	/* 4 MiB of meta (a node list of ~7600 nodes) */
	n = ibv_plan(lens, 0, 4u << 20, 8704, 0, rem, &mrem);
	assert_true(mrem);
	assert_int_equal(n, 32 + 24);
	/* no room even for the descriptors */
	assert_int_equal(ibv_plan(lens, 3, 9000, 100, 0, rem, &mrem), -EMSGSIZE);
}

/* ---------------------------------------------------- registration cache -- */

struct fake {
	int regs, deregs;
	void *last;
};

static int fake_reg(void *ctx, void *addr, size_t len, void **mr)
{
	struct fake *f = ctx;
	(void)len;
	if (addr == (void *)0xdead000)
		return -ENOMEM;
	f->regs++;
	*mr = malloc(1);
	f->last = *mr;
	return 0;
}

static void fake_dereg(void *ctx, void *mr)
{
	struct fake *f = ctx;
	f->deregs++;
	free(mr);
}

static void test_mrc(void **state)
{
	struct fake f = {0};
	struct ibv_mrc c;
	struct ibv_mrc_ent *a, *b, *e;
	char *buf = malloc(1 << 20);
	(void)state;

	assert_int_equal(ibv_mrc_init(&c, 2, true, fake_reg, fake_dereg, &f), 0);
	/* first use registers, the same buffer again does not */
	assert_int_equal(ibv_mrc_get(&c, buf, 1 << 20, &a), 0);
	assert_int_equal(f.regs, 1);
	assert_int_equal(ibv_mrc_get(&c, buf, 1 << 20, &b), 0);
	assert_ptr_equal(a, b);
	assert_int_equal(f.regs, 1);
	/* a range inside it is a hit too */
	assert_int_equal(ibv_mrc_get(&c, buf + 4096, 100, &e), 0);
	assert_ptr_equal(e, a);
	assert_int_equal(f.regs, 1);
	ibv_mrc_put(&c, a);
	ibv_mrc_put(&c, b);
	ibv_mrc_put(&c, e);
	assert_int_equal(f.deregs, 0); /* cached */
	/* steady state: a thousand sends of two buffers register nothing more */
	{
		char *other = malloc(8192);
		int i;
		for (i = 0; i < 1000; i++) {
			assert_int_equal(ibv_mrc_get(&c, i % 2 ? other : buf, 4096, &e), 0);
			ibv_mrc_put(&c, e);
		}
		assert_int_equal(f.regs, 2);
		/* a third buffer over the limit of 2 evicts the least recently used */
		{
			char *third = malloc(8192);
			assert_int_equal(ibv_mrc_get(&c, third, 100, &e), 0);
			assert_int_equal(f.regs, 3);
			assert_int_equal(f.deregs, 1);
			assert_int_equal(c.n, 2);
			/* a held entry is never evicted */
			{
				char *fourth = malloc(8192);
				struct ibv_mrc_ent *g;
				struct ibv_mrc_ent *h2;
				assert_int_equal(ibv_mrc_get(&c, other, 100, &g), 0);
				assert_int_equal(ibv_mrc_get(&c, fourth, 100, &h2), 0);
				assert_int_equal(c.n, 3); /* all three held: over the limit */
				ibv_mrc_put(&c, h2);
				ibv_mrc_put(&c, g);
				free(fourth);
			}
			ibv_mrc_put(&c, e);
			/* invalidating a held range: deregistered at the last put, and
			 * the next get registers anew */
			assert_int_equal(ibv_mrc_get(&c, third, 100, &e), 0);
			{
				int before = f.deregs, regs = f.regs;
				ibv_mrc_invalidate(&c, third, 100);
				assert_int_equal(f.deregs, before);
				ibv_mrc_put(&c, e);
				assert_int_equal(f.deregs, before + 1);
				assert_int_equal(ibv_mrc_get(&c, third, 100, &e), 0);
				assert_int_equal(f.regs, regs + 1);
				ibv_mrc_put(&c, e);
			}
			free(third);
		}
		free(other);
	}
	/* a failed registration is reported, nothing cached */
	assert_int_equal(ibv_mrc_get(&c, (void *)0xdead000, 10, &e), -ENOMEM);
	ibv_mrc_fini(&c);
	assert_int_equal(f.regs, f.deregs);

	/* caching off (PS_IBV_MR_CACHE=0): every get registers, every put drops */
	memset(&f, 0, sizeof(f));
	assert_int_equal(ibv_mrc_init(&c, 16, false, fake_reg, fake_dereg, &f), 0);
	assert_int_equal(ibv_mrc_get(&c, buf, 100, &a), 0);
	assert_int_equal(ibv_mrc_get(&c, buf, 100, &b), 0);
	assert_ptr_not_equal(a, b);
	ibv_mrc_put(&c, a);
	ibv_mrc_put(&c, b);
	assert_int_equal(f.regs, 2);
	assert_int_equal(f.deregs, 2);
	ibv_mrc_fini(&c);
	free(buf);
}

/* The fingerprint changes when the memory behind an address is replaced. */
static uint64_t g_gen;
static bool fake_stamp(void *ctx, uintptr_t start, uintptr_t end, uint64_t *st)
{
	(void)ctx;
	(void)start;
	(void)end;
	*st = g_gen;
	return true;
}

static void test_mrc_stale(void **state)
{
	struct fake f = {0};
	struct ibv_mrc c;
	struct ibv_mrc_ent *a, *b;
	char *buf = malloc(65536);
	(void)state;
	assert_int_equal(ibv_mrc_init(&c, 16, true, fake_reg, fake_dereg, &f), 0);
	c.stamp = fake_stamp;
	g_gen = 1;
	assert_int_equal(ibv_mrc_get(&c, buf, 65536, &a), 0);
	ibv_mrc_put(&c, a);
	assert_int_equal(ibv_mrc_get(&c, buf, 65536, &a), 0);
	ibv_mrc_put(&c, a);
	assert_int_equal(f.regs, 1); /* same pages: a hit */
	/* freed and mapped again: the old registration goes, a new one is made */
	g_gen = 2;
	assert_int_equal(ibv_mrc_get(&c, buf, 65536, &b), 0);
	assert_int_equal(f.regs, 2);
	assert_int_equal(f.deregs, 1);
	assert_int_equal(c.stale, 1);
	/* held while it goes stale: deregistered only at its put */
	g_gen = 3;
	assert_int_equal(ibv_mrc_get(&c, buf, 65536, &a), 0);
	assert_ptr_not_equal(a, b);
	assert_int_equal(f.deregs, 1);
	ibv_mrc_put(&c, b);
	assert_int_equal(f.deregs, 2);
	ibv_mrc_put(&c, a);
	ibv_mrc_fini(&c);
	assert_int_equal(f.regs, f.deregs);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_credits_basic),
		cmocka_unit_test(test_credits_simulation),
		cmocka_unit_test(test_sop),
		cmocka_unit_test(test_oq),
		cmocka_unit_test(test_pick_qp),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_mrc),
		cmocka_unit_test(test_mrc_stale),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
