/* Unit tests of van_fabric's registration cache (fab_mrcache.c), with a fake
 * registration function that records what was registered. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fab_mrcache.h"

struct fake {
	int regs, deregs, live;
	int fail_next;
	uintptr_t last_addr;
	size_t last_len;
	int32_t last_type, last_dev;
};

static int fake_reg(void *ctx, void *addr, size_t len, int32_t mem_type, int32_t dev_id,
		    void **mr, void **desc)
{
	struct fake *f = ctx;
	if (f->fail_next) {
		f->fail_next = 0;
		return -ENOMEM;
	}
	f->regs++;
	f->live++;
	f->last_addr = (uintptr_t)addr;
	f->last_len = len;
	f->last_type = mem_type;
	f->last_dev = dev_id;
	*mr = (void *)(uintptr_t)(0x1000 + f->regs);
	*desc = (void *)(uintptr_t)(0x2000 + f->regs);
	return 0;
}

static void fake_dereg(void *ctx, void *mr)
{
	struct fake *f = ctx;
	(void)mr;
	f->deregs++;
	f->live--;
}

struct fx {
	struct fake f;
	struct fab_mrc c;
	size_t pg;
	uint8_t *mem; /* 64 pages to point into (never touched) */
	void *raw;
};

static int setup_n(void **state, size_t max, int enabled)
{
	struct fx *x = calloc(1, sizeof(*x));
	x->pg = (size_t)sysconf(_SC_PAGESIZE);
	x->raw = malloc(x->pg * 66);
	x->mem = (uint8_t *)(((uintptr_t)x->raw + x->pg - 1) & ~(x->pg - 1));
	assert_int_equal(fab_mrc_init(&x->c, max, enabled, fake_reg, fake_dereg, &x->f), 0);
	*state = x;
	return 0;
}

static int setup(void **state)
{
	return setup_n(state, 4, 1);
}

static int setup_off(void **state)
{
	return setup_n(state, 4, 0);
}

static int teardown(void **state)
{
	struct fx *x = *state;
	fab_mrc_fini(&x->c);
	assert_int_equal(x->f.live, 0); /* fini deregisters everything */
	free(x->raw);
	free(x);
	return 0;
}

/* the same buffer twice: one registration, the same entry */
static void test_hit(void **state)
{
	struct fx *x = *state;
	struct fab_mrc_ent *a, *b;
	assert_int_equal(fab_mrc_get(&x->c, x->mem + 100, 5000, 0, -1, true, &a), 0);
	assert_int_equal(x->f.regs, 1);
	/* registered page-aligned: covers [mem, mem + 2 pages) */
	assert_int_equal(x->f.last_addr, (uintptr_t)x->mem);
	assert_int_equal(x->f.last_len, 2 * x->pg);
	fab_mrc_put(&x->c, a);
	assert_int_equal(fab_mrc_get(&x->c, x->mem + 100, 5000, 0, -1, true, &b), 0);
	assert_ptr_equal(a, b);
	assert_int_equal(x->f.regs, 1);
	assert_int_equal(x->c.hits, 1);
	/* a range inside the registered one hits too */
	fab_mrc_put(&x->c, b);
	assert_int_equal(fab_mrc_get(&x->c, x->mem + 8, 16, 0, -1, true, &b), 0);
	assert_ptr_equal(a, b);
	assert_int_equal(x->f.regs, 1);
	fab_mrc_put(&x->c, b);
}

/* a range that sticks out of a cached entry is registered anew */
static void test_partial_miss(void **state)
{
	struct fx *x = *state;
	struct fab_mrc_ent *a, *b;
	assert_int_equal(fab_mrc_get(&x->c, x->mem, x->pg, 0, -1, true, &a), 0);
	assert_int_equal(fab_mrc_get(&x->c, x->mem + x->pg / 2, x->pg, 0, -1, true, &b), 0);
	assert_ptr_not_equal(a, b);
	assert_int_equal(x->f.regs, 2);
	assert_true(b->start <= (uintptr_t)x->mem + x->pg / 2);
	assert_true(b->end >= (uintptr_t)x->mem + x->pg / 2 + x->pg);
	fab_mrc_put(&x->c, a);
	fab_mrc_put(&x->c, b);
}

/* memory type and device are part of the key */
static void test_type_key(void **state)
{
	struct fx *x = *state;
	struct fab_mrc_ent *a, *b, *c;
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 64, 0, -1, true, &a), 0);
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 64, 1, 0, true, &b), 0);
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 64, 1, 1, true, &c), 0);
	assert_int_equal(x->f.regs, 3);
	assert_int_equal(x->f.last_type, 1);
	assert_int_equal(x->f.last_dev, 1);
	fab_mrc_put(&x->c, a);
	fab_mrc_put(&x->c, b);
	fab_mrc_put(&x->c, c);
}

/* bounded: the least recently used idle entry goes, held ones stay */
static void test_evict_lru(void **state)
{
	struct fx *x = *state;
	struct fab_mrc_ent *e[6], *held;
	int i;
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, true, &held), 0); /* kept held */
	for (i = 1; i < 4; i++) {
		assert_int_equal(fab_mrc_get(&x->c, x->mem + 2 * i * x->pg, 1, 0, -1, true, &e[i]), 0);
		fab_mrc_put(&x->c, e[i]);
	}
	assert_int_equal(x->c.n, 4);
	/* touch entry 1 so that entry 2 is the oldest idle one */
	assert_int_equal(fab_mrc_get(&x->c, x->mem + 2 * x->pg, 1, 0, -1, true, &e[1]), 0);
	fab_mrc_put(&x->c, e[1]);
	assert_int_equal(fab_mrc_get(&x->c, x->mem + 20 * x->pg, 1, 0, -1, true, &e[4]), 0);
	fab_mrc_put(&x->c, e[4]);
	assert_int_equal(x->c.n, 4);
	assert_int_equal(x->c.evictions, 1);
	assert_int_equal(x->f.deregs, 1);
	/* entry 2 was evicted: getting it registers again; entry 1 still hits */
	x->f.regs = 0;
	assert_int_equal(fab_mrc_get(&x->c, x->mem + 2 * x->pg, 1, 0, -1, true, &e[1]), 0);
	assert_int_equal(x->f.regs, 0);
	fab_mrc_put(&x->c, e[1]);
	assert_int_equal(fab_mrc_get(&x->c, x->mem + 4 * x->pg, 1, 0, -1, true, &e[2]), 0);
	assert_int_equal(x->f.regs, 1);
	fab_mrc_put(&x->c, e[2]);
	/* the held entry was never evicted */
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, true, &e[5]), 0);
	assert_ptr_equal(e[5], held);
	fab_mrc_put(&x->c, e[5]);
	fab_mrc_put(&x->c, held);
}

/* all entries held and the cache full: it grows rather than fail */
static void test_full_of_held(void **state)
{
	struct fx *x = *state;
	struct fab_mrc_ent *e[6];
	int i;
	for (i = 0; i < 6; i++)
		assert_int_equal(fab_mrc_get(&x->c, x->mem + 2 * i * x->pg, 1, 0, -1, true, &e[i]), 0);
	assert_int_equal(x->c.n, 6);
	assert_int_equal(x->f.deregs, 0);
	for (i = 0; i < 6; i++)
		fab_mrc_put(&x->c, e[i]);
}

/* invalidate drops overlapping entries; a held one goes at its last put */
static void test_invalidate(void **state)
{
	struct fx *x = *state;
	struct fab_mrc_ent *a, *b, *c;
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, true, &a), 0);
	assert_int_equal(fab_mrc_get(&x->c, x->mem + 4 * x->pg, 1, 0, -1, true, &b), 0);
	fab_mrc_put(&x->c, b);
	fab_mrc_invalidate(&x->c, x->mem, 8 * x->pg);
	assert_int_equal(x->c.n, 0);
	assert_int_equal(x->f.deregs, 1); /* b now, a still held */
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, true, &c), 0);
	assert_ptr_not_equal(c, a); /* a is not handed out again */
	fab_mrc_put(&x->c, a);
	assert_int_equal(x->f.deregs, 2);
	fab_mrc_put(&x->c, c);
}

/* a failed registration is reported and leaves nothing behind */
static void test_reg_fails(void **state)
{
	struct fx *x = *state;
	struct fab_mrc_ent *a;
	x->f.fail_next = 1;
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, true, &a), -ENOMEM);
	assert_int_equal(x->c.n, 0);
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, true, &a), 0);
	fab_mrc_put(&x->c, a);
}

/* caching off (PS_FABRIC_MR_CACHE=0): register at get, deregister at put */
static void test_disabled(void **state)
{
	struct fx *x = *state;
	struct fab_mrc_ent *a;
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, true, &a), 0);
	fab_mrc_put(&x->c, a);
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, true, &a), 0);
	fab_mrc_put(&x->c, a);
	assert_int_equal(x->f.regs, 2);
	assert_int_equal(x->f.deregs, 2);
	assert_int_equal(x->c.n, 0);
}

/* one holder may ask for a registration of its own: not cached, not shared */
static void test_uncached_get(void **state)
{
	struct fx *x = *state;
	struct fab_mrc_ent *a, *b, *c;
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, true, &a), 0);
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, false, &b), 0);
	assert_ptr_not_equal(a, b);
	assert_int_equal(x->f.regs, 2);
	assert_int_equal(x->c.n, 1);
	fab_mrc_put(&x->c, b);
	assert_int_equal(x->f.deregs, 1); /* gone at its put */
	assert_int_equal(fab_mrc_get(&x->c, x->mem, 1, 0, -1, true, &c), 0);
	assert_ptr_equal(a, c); /* the cached one is still there */
	fab_mrc_put(&x->c, a);
	fab_mrc_put(&x->c, c);
}

/* many entries in address order: lookups find the one that covers */
static void test_sorted(void **state)
{
	struct fx *x = *state;
	struct fab_mrc_ent *e[4], *g;
	int order[4] = {3, 0, 2, 1}, i;
	for (i = 0; i < 4; i++)
		assert_int_equal(
			fab_mrc_get(&x->c, x->mem + 8 * order[i] * x->pg, 3 * x->pg, 0, -1, true, &e[i]), 0);
	for (i = 1; i < 4; i++)
		assert_true(x->c.ents[i - 1]->start < x->c.ents[i]->start);
	for (i = 0; i < 4; i++) {
		assert_int_equal(fab_mrc_get(&x->c, x->mem + 8 * order[i] * x->pg + x->pg, x->pg, 0,
					     -1, true, &g),
				 0);
		assert_ptr_equal(g, e[i]);
		fab_mrc_put(&x->c, g);
		fab_mrc_put(&x->c, e[i]);
	}
	assert_int_equal(x->f.regs, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_partial_miss, setup, teardown),
		cmocka_unit_test_setup_teardown(test_type_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_evict_lru, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_of_held, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalidate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reg_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disabled, setup_off, teardown),
		cmocka_unit_test_setup_teardown(test_sorted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_uncached_get, setup, teardown),
	};
	return cmocka_run_group_tests_name("van_fabric registration cache", tests, NULL, NULL);
}
