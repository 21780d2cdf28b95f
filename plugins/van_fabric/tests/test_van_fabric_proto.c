/* Unit tests of van_fabric's wire formats and ordering (fab_proto.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fab_proto.h"

static void test_tags(void **state)
{
	uint64_t t = fab_tag(FAB_KIND_DATA, 0x2abcde, 0xdeadbeef, 63);
	(void)state;
	assert_int_equal(fab_tag_kind(t), FAB_KIND_DATA);
	assert_int_equal(fab_tag_stream(t), 0x2abcde);
	assert_int_equal(fab_tag_seq(t), 0xdeadbeef);
	assert_int_equal(fab_tag_part(t), 63);
	/* every header matches the header receive, no data part does */
	t = fab_tag(FAB_KIND_HDR, FAB_STREAM_MAX, 0xffffffff, 0);
	assert_int_equal(t & ~FAB_HDR_IGNORE, FAB_HDR_TAG);
	t = fab_tag(FAB_KIND_DATA, 1, 0, 0);
	assert_int_not_equal(t & ~FAB_HDR_IGNORE, FAB_HDR_TAG);
	/* a stream id never spills into the kind bits */
	t = fab_tag(FAB_KIND_HDR, 0xffffffff, 0, 0);
	assert_int_equal(fab_tag_kind(t), FAB_KIND_HDR);
}

static void test_hdr_roundtrip(void **state)
{
	uint8_t buf[4096];
	uint64_t lens[4] = {100, 0, 5000, 7};
	bool inl[4] = {true, true, false, true};
	size_t off[4], n;
	struct fab_hdr_view v;
	char why[128];
	(void)state;

	n = fab_hdr_write(buf, 77, 4, lens, inl, off);
	assert_int_equal(n, fab_hdr_size(4, lens, inl));
	assert_int_equal(off[0] % 8, 0);
	assert_int_equal(off[3] % 8, 0);
	assert_int_equal(off[2], 0);
	memset(buf + off[0], 'm', 100);
	memset(buf + off[3], 's', 7);
	assert_int_equal(fab_hdr_parse(buf, n, &v, why, sizeof(why)), 0);
	assert_int_equal(v.seq, 77);
	assert_int_equal(v.nparts, 4);
	assert_int_equal(v.len[2], 5000);
	assert_false(v.inl[2]);
	assert_true(v.inl[0] && v.inl[1] && v.inl[3]);
	assert_int_equal(v.off[0], off[0]);
	assert_int_equal(v.off[3], off[3]);
	assert_int_equal(buf[v.off[3] + 6], 's');
}

static void test_hdr_malformed(void **state)
{
	uint8_t buf[256];
	uint64_t lens[2] = {40, 8};
	bool inl[2] = {true, true};
	size_t off[2], n;
	struct fab_hdr_view v;
	char why[128];
	(void)state;

	n = fab_hdr_write(buf, 1, 2, lens, inl, off);
	/* cut short: the inline part runs past the end */
	assert_int_equal(fab_hdr_parse(buf, n - 1, &v, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "past the end"));
	assert_int_equal(fab_hdr_parse(buf, 10, &v, why, sizeof(why)), -EPROTO);
	/* bad magic */
	buf[0] ^= 1;
	assert_int_equal(fab_hdr_parse(buf, n, &v, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "magic"));
	buf[0] ^= 1;
	/* too many parts */
	buf[8] = 200;
	assert_int_equal(fab_hdr_parse(buf, n, &v, why, sizeof(why)), -EPROTO);
	buf[8] = 0;
	assert_int_equal(fab_hdr_parse(buf, n, &v, why, sizeof(why)), -EPROTO);
	buf[8] = 2;
	/* an inline length that wraps around */
	memset(buf + 16, 0xff, 7);
	buf[23] = 0x80;
	assert_int_equal(fab_hdr_parse(buf, n, &v, why, sizeof(why)), -EPROTO);
}

static void test_hello(void **state)
{
	struct fab_hello h, g;
	uint8_t w[FAB_HELLO_WIRE];
	(void)state;
	memset(&h, 0, sizeof(h));
	h.kind = FAB_ACCEPT;
	h.node_id = 32767;
	h.stream = 4194303;
	h.seq = 0xfffffffe;
	h.hdr_max = 8192;
	h.addr_len = 16;
	memset(h.addr, 0xab, 16);
	strcpy(h.prov, "tcp;ofi_rxm");
	strcpy(h.text, "hello");
	fab_hello_pack(&h, w);
	assert_int_equal(fab_hello_unpack(w, &g), 0);
	assert_int_equal(g.kind, FAB_ACCEPT);
	assert_int_equal(g.node_id, 32767);
	assert_int_equal(g.stream, 4194303);
	assert_int_equal(g.seq, 0xfffffffe);
	assert_int_equal(g.hdr_max, 8192);
	assert_int_equal(g.addr_len, 16);
	assert_memory_equal(g.addr, h.addr, 16);
	assert_string_equal(g.prov, "tcp;ofi_rxm");
	assert_string_equal(g.text, "hello");
	/* wrong magic, wrong version, an address that does not fit */
	w[0] ^= 1;
	assert_int_equal(fab_hello_unpack(w, &g), -EPROTO);
	w[0] ^= 1;
	w[6] = 9;
	assert_int_equal(fab_hello_unpack(w, &g), -EPROTONOSUPPORT);
	w[6] = 1;
	w[24] = 65;
	assert_int_equal(fab_hello_unpack(w, &g), -EPROTO);
}

/* The greeting is van_util.h's (tests/unit/test_van_util.c). */

#define ENT(i) ((struct fab_oq_ent){.seq = (i)})

static void test_order(void **state)
{
	struct fab_oq q = {.next = 0};
	struct fab_oq_ent e[5];
	int i;
	(void)state;
	for (i = 0; i < 5; i++)
		e[i] = ENT((uint32_t)i);
	/* 2, then 0, then 1 arrive; 1 completes last */
	assert_int_equal(fab_oq_add(&q, &e[2], 100), 0);
	assert_int_equal(fab_oq_add(&q, &e[0], 100), 0);
	assert_int_equal(fab_oq_add(&q, &e[1], 100), 0);
	e[2].complete = true;
	assert_null(fab_oq_pop(&q)); /* 0 is not complete */
	e[0].complete = true;
	assert_ptr_equal(fab_oq_pop(&q), &e[0]);
	assert_null(fab_oq_pop(&q)); /* 1 is not complete: 2 must wait */
	e[1].complete = true;
	assert_ptr_equal(fab_oq_pop(&q), &e[1]);
	assert_ptr_equal(fab_oq_pop(&q), &e[2]);
	assert_null(fab_oq_pop(&q));
	assert_int_equal(q.count, 0);
	/* duplicates and old numbers are refused, far ones too */
	assert_int_equal(fab_oq_add(&q, &e[0], 100), -EEXIST);
	assert_int_equal(fab_oq_add(&q, &e[3], 100), 0);
	e[4] = ENT(3);
	assert_int_equal(fab_oq_add(&q, &e[4], 100), -EEXIST);
	e[4] = ENT(500);
	assert_int_equal(fab_oq_add(&q, &e[4], 100), -ERANGE);
}

/* sequence numbers wrap around 2^32 */
static void test_order_wrap(void **state)
{
	struct fab_oq q = {.next = 0xfffffffe};
	struct fab_oq_ent a = ENT(0xfffffffe), b = ENT(0xffffffff), c = ENT(0);
	(void)state;
	assert_int_equal(fab_oq_add(&q, &c, 100), 0);
	assert_int_equal(fab_oq_add(&q, &b, 100), 0);
	assert_int_equal(fab_oq_add(&q, &a, 100), 0);
	a.complete = b.complete = c.complete = true;
	assert_ptr_equal(fab_oq_pop(&q), &a);
	assert_ptr_equal(fab_oq_pop(&q), &b);
	assert_ptr_equal(fab_oq_pop(&q), &c);
	assert_int_equal(q.next, 1);
}

static void test_prov_match(void **state)
{
	(void)state;
	assert_true(fab_prov_match(NULL, "tcp;ofi_rxm"));
	assert_true(fab_prov_match("", "sockets"));
	assert_true(fab_prov_match("tcp", "tcp;ofi_rxm"));
	assert_true(fab_prov_match("ofi_rxm", "tcp;ofi_rxm"));
	assert_false(fab_prov_match("tc", "tcp;ofi_rxm"));
	assert_false(fab_prov_match("tcp", "sockets"));
	assert_true(fab_prov_match("efa,sockets", "sockets"));
	assert_true(fab_prov_match("efa,tcp", "efa"));
	assert_false(fab_prov_match("^sockets", "sockets"));
	assert_true(fab_prov_match("^sockets", "tcp;ofi_rxm"));
	assert_false(fab_prov_match("^tcp,shm", "tcp;ofi_rxm"));
	assert_false(fab_prov_match("tcp", NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tags),	     cmocka_unit_test(test_hdr_roundtrip),
		cmocka_unit_test(test_hdr_malformed), cmocka_unit_test(test_hello),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_order_wrap),   cmocka_unit_test(test_prov_match),
	};
	return cmocka_run_group_tests_name("van_fabric wire formats and order", tests, NULL, NULL);
}
