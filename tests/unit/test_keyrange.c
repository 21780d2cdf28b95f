/*
 * Unit tests for key ranges (docs/wire.md 10.1) and for the worker's slicing of a
 * request by those ranges (core/kv_worker.c), tested through the public
 * psl_kv_* API: the node state is set up by hand, the van is a fake whose
 * send records every message, and responses are fed in through the core's
 * receive callback, as a van would deliver them.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "message.h"
#include "postoffice.h"
#include "pslite.h"
#include "van_host.h"
#include "testutil.h"

/* ----------------------------------------------------------- key ranges -- */

static void set_servers(int s)
{
	psl__po.cfg.num_servers = psl__po.cfg.server_groups = s;
	psl__po.cfg.group_size = 1;
}

struct range {
	int rank;
	uint64_t begin, end;
};

/* Values worked out independently: q = floor((2^64-1)/S), [q*i, q*(i+1)). */
static void check_ranges(int S, const struct range *want, size_t n)
{
	uint64_t b, e, prev_end = 0;
	size_t i;
	int r;
	set_servers(S);
	for (i = 0; i < n; i++) {
		assert_int_equal(psl_server_key_range(want[i].rank, &b, &e), 0);
		if (b != want[i].begin || e != want[i].end)
			fail_msg("S=%d rank %d: [%#llx, %#llx), expected [%#llx, %#llx)", S,
				 want[i].rank, (unsigned long long)b, (unsigned long long)e,
				 (unsigned long long)want[i].begin,
				 (unsigned long long)want[i].end);
	}
	/* adjacent, ascending, starting at 0, and never holding 2^64-1 */
	for (r = 0; r < S; r++) {
		assert_int_equal(psl_server_key_range(r, &b, &e), 0);
		assert_true(b == prev_end);
		assert_true(e > b);
		prev_end = e;
	}
	assert_true(prev_end <= UINT64_MAX); /* [.., end) excludes end itself */
	assert_true(prev_end != 0);
	assert_int_equal(psl_server_key_range(S, &b, &e), -EINVAL);
	assert_int_equal(psl_server_key_range(-1, &b, &e), -EINVAL);
	assert_int_equal(psl_server_key_range(0, NULL, &e), -EINVAL);
	assert_int_equal(psl_server_key_range(0, &b, NULL), -EINVAL);
}

static void test_ranges(void **state)
{
	static const struct range s1[] = {{0, 0, 0xFFFFFFFFFFFFFFFFull}};
	static const struct range s2[] = {{0, 0, 0x7FFFFFFFFFFFFFFFull},
					  {1, 0x7FFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFEull}};
	static const struct range s3[] = {{0, 0, 0x5555555555555555ull},
					  {1, 0x5555555555555555ull, 0xAAAAAAAAAAAAAAAAull},
					  {2, 0xAAAAAAAAAAAAAAAAull, 0xFFFFFFFFFFFFFFFFull}};
	static const struct range s7[] = {{0, 0, 0x2492492492492492ull},
					  {6, 0xDB6DB6DB6DB6DB6Cull, 0xFFFFFFFFFFFFFFFEull}};
	static const struct range s1000[] = {
		{0, 0, 0x4189374BC6A7EFull},
		{1, 0x4189374BC6A7EFull, 0x83126E978D4FDEull},
		{999, 18428297329635841449ull, 18446744073709551000ull}};
	(void)state;
	check_ranges(1, s1, 1);
	check_ranges(2, s2, 2);
	check_ranges(3, s3, 3);
	check_ranges(7, s7, 2);
	check_ranges(1000, s1000, 3);
	set_servers(0);
	{
		uint64_t b, e;
		assert_int_equal(psl_server_key_range(0, &b, &e), -ESHUTDOWN);
	}
}

static void test_ids(void **state)
{
	(void)state;
	assert_int_equal(psl_server_rank_to_id(0), 8);
	assert_int_equal(psl_server_rank_to_id(3), 14);
	assert_int_equal(psl_worker_rank_to_id(0), 9);
	assert_int_equal(psl_worker_rank_to_id(3), 15);
	assert_int_equal(psl_id_to_rank(8), 0);
	assert_int_equal(psl_id_to_rank(9), 0);
	assert_int_equal(psl_id_to_rank(14), 3);
	assert_int_equal(psl_id_to_rank(15), 3);
	assert_int_equal(psl_id_to_rank(1), 0);
}

#include "fakevan.h"

/* A server's response to request s (echoing it), with optional data. */
static void respond(const struct sent *s, int option, uint32_t nseg, const void *const *data,
		    const size_t *len)
{
	struct psl__meta m;
	uint8_t buf[256];
	size_t n;
	psl__meta_init(&m);
	m.head = s->m.head;
	m.app_id = s->m.app_id;
	m.customer_id = s->m.customer_id;
	m.timestamp = s->m.timestamp;
	m.request = false;
	m.push = s->m.push;
	m.key = s->m.key;
	m.addr = s->m.addr;
	m.val_len = s->m.val_len;
	m.option = option;
	m.src_dev_type = m.dst_dev_type = PSL_DEV_CPU;
	if (nseg) {
		m.data_type_size = nseg;
		m.data_type[0] = 8;
		m.data_type[1] = 9;
		m.data_type[2] = 3;
	}
	n = psl__meta_encode(&m, buf);
	deliver_raw(s->to, buf, n, nseg, data, len);
}

static const struct sent *sent_to(int id)
{
	int i;
	for (i = 0; i < g_nsent; i++)
		if (g_sent[i].to == id)
			return &g_sent[i];
	return NULL;
}

/* --------------------------------------------------------------- slicing -- */

static void test_push_slices_with_lens(void **state)
{
	const uint64_t q = 0x5555555555555555ull;
	uint64_t keys[7] = {0, 5, q - 1, q, q + 1, 2 * q + 7, UINT64_MAX - 1};
	int lens[7] = {1, 2, 3, 0, 4, 5, 6};
	float vals[21];
	struct psl_kv kv = {keys, 7, vals, 21, lens, PSL_MEM_HOST, 0};
	struct psl_kv_worker *w;
	static const struct {
		int id;
		int k0, k1, v0, v1;
	} want[3] = {{8, 0, 3, 0, 6}, {10, 3, 5, 6, 10}, {12, 5, 7, 10, 21}};
	int i, ts;
	(void)state;

	node_up(3);
	for (i = 0; i < 21; i++)
		vals[i] = (float)i + 0.5f;
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	ts = psl_kv_push(w, &kv, 17, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_nsent, 3);
	for (i = 0; i < 3; i++) {
		const struct sent *s = sent_to(want[i].id);
		int nk = want[i].k1 - want[i].k0, nv = want[i].v1 - want[i].v0;
		assert_non_null(s);
		assert_true(s->m.request);
		assert_true(s->m.push);
		assert_false(s->m.simple_app);
		assert_int_equal(s->m.head, 17);
		assert_int_equal(s->m.app_id, 0);
		assert_int_equal(s->m.customer_id, 0);
		assert_int_equal(s->m.timestamp, ts);
		assert_int_equal(s->m.val_len, nv);
		assert_int_equal(s->m.data_type_size, 3);
		assert_int_equal(s->m.data_type[0], 8);
		assert_int_equal(s->m.data_type[1], 9);
		assert_int_equal(s->m.data_type[2], 3);
		assert_int_equal(s->m.data_size, nk * 8 + nv * 4 + nk * 4);
		assert_int_equal(s->m.src_dev_type, PSL_DEV_CPU);
		assert_int_equal(s->nseg, 3);
		assert_int_equal(s->len[0], (size_t)nk * 8);
		assert_memory_equal(s->seg[0], keys + want[i].k0, (size_t)nk * 8);
		assert_int_equal(s->len[1], (size_t)nv * 4);
		assert_memory_equal(s->seg[1], vals + want[i].v0, (size_t)nv * 4);
		assert_int_equal(s->len[2], (size_t)nk * 4);
		assert_memory_equal(s->seg[2], lens + want[i].k0, (size_t)nk * 4);
	}
	/* not complete until every server answered */
	respond(sent_to(8), 0, 0, NULL, NULL);
	respond(sent_to(12), 0, 0, NULL, NULL);
	respond(sent_to(10), 0, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	psl_kv_worker_free(w);
}

static void test_push_skips_empty_servers(void **state)
{
	uint64_t b, e, keys[3];
	double vals[6] = {1, 2, 3, 4, 5, 6};
	struct psl_kv kv = {keys, 3, vals, 6, NULL, PSL_MEM_HOST, 0};
	struct psl_kv_worker *w;
	const struct sent *s;
	struct capture c;
	char *out;
	int ts;
	(void)state;

	node_up(4);
	psl_server_key_range(0, &b, &e);
	keys[0] = b + 1;
	keys[1] = e - 1; /* the last key of server 0 */
	psl_server_key_range(3, &b, &e);
	keys[2] = b; /* the first key of server 3 */
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT64, &w), 0);
	ts = psl_kv_zpush(w, &kv, 0, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_nsent, 2); /* servers 1 and 2 get nothing */
	s = sent_to(8);
	assert_non_null(s);
	assert_int_equal(s->len[0], 16);
	assert_int_equal(s->len[1], 4 * 8); /* two values per key */
	assert_memory_equal(s->seg[1], vals, 32);
	assert_int_equal(s->nseg, 2);	       /* no lens */
	assert_int_equal(s->m.data_type_size, 2);
	s = sent_to(14);
	assert_non_null(s);
	assert_int_equal(s->len[0], 8);
	assert_memory_equal(s->seg[0], &keys[2], 8);
	assert_memory_equal(s->seg[1], vals + 4, 16);
	assert_null(sent_to(10));
	assert_null(sent_to(12));

	/* a response nobody waits for is dropped, naming the sender */
	respond(sent_to(8), 0, 0, NULL, NULL);
	capture_start(&c);
	respond(sent_to(8), 0, 0, NULL, NULL); /* a second answer from server 0 */
	{
		struct sent fake = *sent_to(14);
		fake.to = 10; /* server 1 was never asked */
		respond(&fake, 0, 0, NULL, NULL);
		fake.to = 14;
		fake.m.timestamp = ts + 1000; /* no such request */
		respond(&fake, 0, 0, NULL, NULL);
	}
	out = capture_end(&c);
	assert_int_equal(count_lines_with(out, "dropped a response from server 0 (id 8"), 1);
	assert_int_equal(count_lines_with(out, "dropped a response from server 1 (id 10"), 1);
	assert_int_equal(count_lines_with(out, "dropped a response from server 3 (id 14"), 1);
	free(out);
	respond(sent_to(14), 0, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	psl_kv_worker_free(w);
}

/* Keys outside every range: 2^64-1 always, and the top of the last range. */
static void test_excluded_keys(void **state)
{
	struct psl_kv_worker *w;
	uint64_t key;
	uint8_t v = 1;
	struct psl_kv kv = {&key, 1, &v, 1, NULL, PSL_MEM_HOST, 0};
	struct capture c;
	char *out;
	int S, ts;
	(void)state;

	for (S = 1; S <= 3; S++) {
		uint64_t b, e;
		node_up(S);
		assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
		key = UINT64_MAX;
		capture_start(&c);
		ts = psl_kv_push(w, &kv, 0, NULL, NULL);
		out = capture_end(&c);
		assert_int_equal(ts, -EINVAL);
		assert_contains(out, "beyond the last server's range");
		free(out);
		psl_server_key_range(S - 1, &b, &e);
		key = e; /* the end itself is excluded */
		if (e != UINT64_MAX)
			assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
		assert_int_equal(g_nsent, 0);
		key = e - 1; /* the last key that has a server */
		ts = psl_kv_push(w, &kv, 0, NULL, NULL);
		assert_true(ts >= 0);
		assert_int_equal(g_nsent, 1);
		assert_int_equal(g_sent[0].to, psl_server_rank_to_id(S - 1));
		respond(&g_sent[0], 0, 0, NULL, NULL);
		assert_int_equal(psl_kv_wait(w, ts), 0);
		psl_kv_worker_free(w);
		node_down(NULL);
	}
}

static void test_rejected_requests(void **state)
{
	struct psl_kv_worker *w;
	uint64_t keys[3] = {5, 3, 9};
	int lens[3] = {1, 1, 1};
	uint8_t v[4] = {0};
	struct psl_kv kv = {0};
	struct capture c;
	char *out;
	int ts;
	(void)state;

	node_up(2);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), 0);
	capture_start(&c);
	kv = (struct psl_kv){keys, 3, v, 3, NULL, PSL_MEM_HOST, 0}; /* not sorted */
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
	keys[1] = 5; /* 5, 5, 9: equal keys are sorted enough */
	kv = (struct psl_kv){keys, 3, v, 4, NULL, PSL_MEM_HOST, 0}; /* 4 values for 3 keys */
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
	lens[2] = -1;
	kv = (struct psl_kv){keys, 3, v, 1, lens, PSL_MEM_HOST, 0};
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
	lens[2] = 2;
	kv = (struct psl_kv){keys, 3, v, 3, lens, PSL_MEM_HOST, 0}; /* lens add up to 4 */
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
	out = capture_end(&c);
	assert_contains(out, "keys must be sorted ascending, but key[0]=5 > key[1]=3");
	assert_contains(out, "4 values for 3 keys");
	assert_contains(out, "lens[2]=-1 is negative");
	assert_contains(out, "lens add up to 4 values but 3");
	free(out);
	assert_int_equal(g_nsent, 0);
	/* API misuse */
	assert_int_equal(psl_kv_push(NULL, &kv, 0, NULL, NULL), -EINVAL);
	assert_int_equal(psl_kv_push(w, NULL, 0, NULL, NULL), -EINVAL);
	kv = (struct psl_kv){NULL, 3, v, 3, NULL, PSL_MEM_HOST, 0};
	assert_int_equal(psl_kv_push(w, &kv, 0, NULL, NULL), -EINVAL);
	/* an empty request completes at once and sends nothing */
	kv = (struct psl_kv){keys, 0, v, 0, NULL, PSL_MEM_HOST, 0};
	ts = psl_kv_push(w, &kv, 0, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(g_nsent, 0);
	psl_kv_worker_free(w);
	/* not started */
	psl__po.state = PSL__STOPPED;
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_UINT8, &w), -ESHUTDOWN);
	psl__po.state = PSL__READY;
	assert_int_equal(psl_kv_worker_new(0, 0, (enum psl_dtype)99, &w), -EINVAL);
}

static void test_pull_assembly(void **state)
{
	const uint64_t q = 0x7FFFFFFFFFFFFFFFull;
	uint64_t keys[3] = {1, 2, q + 5};
	float out[8];
	int out_lens[3] = {-9, -9, -9};
	struct psl_kv_out o = {out, 8, 0, out_lens, PSL_MEM_HOST, 0};
	struct psl_kv_worker *w;
	const struct sent *s0, *s1;
	int ts;
	(void)state;

	node_up(2);
	assert_int_equal(psl_kv_worker_new(4, 2, PSL_FLOAT32, &w), 0);
	memset(out, 0, sizeof(out));
	ts = psl_kv_pull(w, keys, 3, &o, 5, NULL, NULL);
	assert_true(ts >= 0);
	assert_int_equal(g_nsent, 2);
	s0 = sent_to(8);
	s1 = sent_to(10);
	assert_non_null(s0);
	assert_non_null(s1);
	assert_false(s0->m.push);
	assert_true(s0->m.request);
	assert_int_equal(s0->m.app_id, 4);
	assert_int_equal(s0->m.customer_id, 2);
	assert_int_equal(s0->m.head, 5);
	assert_int_equal(s0->nseg, 2); /* keys and an empty vals frame; no lens */
	assert_int_equal(s0->len[0], 16);
	assert_int_equal(s0->len[1], 0);
	assert_int_equal(s0->m.data_type_size, 2);
	assert_int_equal(s1->len[0], 8);
	assert_memory_equal(s1->seg[0], &keys[2], 8);

	/* server 1 answers first; the values still come out in key order */
	{
		float v1[1] = {30.0f};
		int l1[1] = {1};
		const void *d[3] = {&keys[2], v1, l1};
		size_t len[3] = {8, 4, 4};
		respond(s1, 0, 3, d, len);
	}
	{
		float v0[5] = {10, 11, 20, 21, 22};
		int l0[2] = {2, 3};
		const void *d[3] = {keys, v0, l0};
		size_t len[3] = {16, 20, 8};
		respond(s0, 0, 3, d, len);
	}
	assert_int_equal(psl_kv_wait(w, ts), 0);
	assert_int_equal(o.num_vals, 6);
	assert_true(out[0] == 10 && out[1] == 11 && out[2] == 20 && out[4] == 22 &&
		    out[5] == 30);
	assert_int_equal(out_lens[0], 2);
	assert_int_equal(out_lens[1], 3);
	assert_int_equal(out_lens[2], 1);
	psl_kv_worker_free(w);
}

static void test_pull_bad_answers(void **state)
{
	uint64_t keys[2] = {1, 2};
	float out[4];
	struct psl_kv_out o = {out, 4, 0, NULL, PSL_MEM_HOST, 0};
	struct psl_kv_worker *w;
	struct capture c;
	char *log;
	int ts;
	(void)state;

	node_up(1);
	assert_int_equal(psl_kv_worker_new(0, 0, PSL_FLOAT32, &w), 0);
	/* an error reply (option < 0, no frames) fails the request with it */
	ts = psl_kv_pull(w, keys, 2, &o, 0, NULL, NULL);
	respond(&g_sent[g_nsent - 1], -EINVAL, 0, NULL, NULL);
	assert_int_equal(psl_kv_wait(w, ts), -EINVAL);

	/* keys that are not the ones asked for */
	ts = psl_kv_pull(w, keys, 2, &o, 0, NULL, NULL);
	capture_start(&c);
	{
		uint64_t other[2] = {1, 3};
		float v[2] = {1, 2};
		const void *d[2] = {other, v};
		size_t len[2] = {16, 8};
		respond(&g_sent[g_nsent - 1], 0, 2, d, len);
	}
	log = capture_end(&c);
	assert_int_equal(psl_kv_wait(w, ts), -EPROTO);
	assert_contains(log, "inconsistent");
	assert_contains(log, "server 0 (id 8");
	free(log);

	/* more values than the buffer holds */
	ts = psl_kv_pull(w, keys, 2, &o, 0, NULL, NULL);
	{
		float v[6] = {1, 2, 3, 4, 5, 6};
		const void *d[2] = {keys, v};
		size_t len[2] = {16, 24};
		respond(&g_sent[g_nsent - 1], 0, 2, d, len);
	}
	assert_int_equal(psl_kv_wait(w, ts), -EMSGSIZE);
	assert_int_equal(o.num_vals, 6);

	/* a value frame that is not a whole number of floats */
	ts = psl_kv_pull(w, keys, 2, &o, 0, NULL, NULL);
	{
		uint8_t v[6] = {0};
		const void *d[2] = {keys, v};
		size_t len[2] = {16, 6};
		respond(&g_sent[g_nsent - 1], 0, 2, d, len);
	}
	assert_int_equal(psl_kv_wait(w, ts), -EPROTO);
	psl_kv_worker_free(w);
}

/* What the receive path drops before any customer sees it. */
static void test_receive_drops(void **state)
{
	struct capture c;
	char *log;
	uint8_t meta[112];
	struct psl__meta m;
	(void)state;

	node_up(2);
	psl__meta_init(&m);
	m.app_id = 0;
	m.customer_id = 0;
	m.timestamp = 1;
	psl__meta_encode(&m, meta);
	capture_start(&c);
	deliver_raw(8, meta, 50, 0, NULL, NULL);      /* short */
	deliver_raw(1001, meta, 112, 0, NULL, NULL);  /* not a node of this job */
	deliver_raw(32767, meta, 112, 0, NULL, NULL); /* anonymous */
	deliver_raw(9, meta, 112, 0, NULL, NULL);     /* this worker's own id */
	psl__po.peers[8].dead = true;                 /* server 0 declared lost */
	deliver_raw(8, meta, 112, 0, NULL, NULL);     /* what it sent before */
	psl__po.peers[8].dead = false;
	log = capture_end(&c);
	assert_contains(log, "dropped a malformed message from server 0 (id 8");
	assert_contains(log, "meta is 50 bytes");
	assert_contains(log, "dropped a message (data) from node 1001: not a node of this job");
	assert_contains(log, "dropped a message (data) from an unregistered peer");
	assert_contains(log, "dropped a message (data) from node 9: it claims this node's own id");
	assert_contains(log, "dropped a message (data) from server 0 (id 8");
	assert_contains(log, "it was declared lost: what it sent before (delivered late");
	free(log);
	assert_int_equal(g_released, 5);
}

#define T(f) cmocka_unit_test_teardown(f, node_down)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_ids),
		T(test_push_slices_with_lens),
		T(test_push_skips_empty_servers),
		T(test_excluded_keys),
		T(test_rejected_requests),
		T(test_pull_assembly),
		T(test_pull_bad_answers),
		T(test_receive_drops),
	};
	return cmocka_run_group_tests_name("keyrange", tests, NULL, NULL);
}
