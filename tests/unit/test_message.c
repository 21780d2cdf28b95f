/*
 * Unit tests for core/message.c: meta encode/decode round trips, the exact
 * bytes of docs/wire.md 4.8's KV push, every malformed meta that
 * psl__meta_decode must reject (each decoded from a buffer of exactly its
 * length, so that AddressSanitizer catches any read past it), and
 * psl__msg_sig against values worked out by hand from docs/wire.md section 9.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "message.h"
#include "testutil.h"

static char why[256];

/* Decodes a heap copy of exactly len bytes. */
static int decode(const void *buf, size_t len, struct psl__meta *m)
{
	void *copy = malloc(len ? len : 1);
	int rc;
	assert_non_null(copy);
	if (len)
		memcpy(copy, buf, len);
	why[0] = 0;
	rc = psl__meta_decode(copy, len, m, why, sizeof(why));
	free(copy);
	return rc;
}

static uint8_t *encode(const struct psl__meta *m, size_t *len)
{
	size_t n = psl__meta_size(m);
	uint8_t *buf = malloc(n);
	assert_non_null(buf);
	memset(buf, 0xCC, n);
	assert_int_equal(psl__meta_encode(m, buf), n);
	*len = n;
	return buf;
}

static void put32(uint8_t *p, size_t off, int32_t v)
{
	memcpy(p + off, &v, 4);
}
static void put64(uint8_t *p, size_t off, uint64_t v)
{
	memcpy(p + off, &v, 8);
}

/* --------------------------------------------------------- round trips -- */

static void fill_node(struct psl__node *n, int role, int id, const char *host, int port)
{
	memset(n, 0, sizeof(*n));
	n->role = role;
	n->id = id;
	snprintf(n->hostname, sizeof(n->hostname), "%s", host);
	n->port = port;
	n->first_port = port;
	n->customer_id = 0;
	n->aux_id = -1;
}

static void assert_node_equal(const struct psl__node *a, const struct psl__node *b)
{
	assert_int_equal(a->role, b->role);
	assert_int_equal(a->id, b->id);
	assert_string_equal(a->hostname, b->hostname);
	assert_int_equal(a->port, b->port);
	assert_int_equal(a->first_port, b->first_port ? b->first_port : b->port);
	assert_int_equal(a->is_recovery, b->is_recovery);
	assert_int_equal(a->customer_id, b->customer_id);
	assert_int_equal(a->aux_id, b->aux_id);
	assert_int_equal(a->addr_len, b->addr_len);
	assert_memory_equal(a->addr, b->addr, a->addr_len);
}

static void test_data_round_trip(void **state)
{
	struct psl__meta m, d;
	uint8_t *buf;
	size_t len;
	static const char body[] = "hello, body";
	(void)state;

	psl__meta_init(&m);
	m.head = 42;
	m.app_id = 3;
	m.customer_id = 5;
	m.timestamp = 123456;
	m.request = true;
	m.push = true;
	m.simple_app = false;
	m.src_dev_type = PSL_DEV_CPU;
	m.src_dev_id = 0;
	m.dst_dev_type = PSL_DEV_GPU;
	m.dst_dev_id = 7;
	m.data_size = 4000;
	m.key = 0xFEDCBA9876543210ull;
	m.addr = 0x00007f0011223344ull;
	m.val_len = 1000;
	m.option = -17;
	m.sid = 99;
	m.body = body;
	m.body_size = (int)strlen(body);
	m.data_type_size = 3;
	m.data_type[0] = PSL_WIRE_UINT64;
	m.data_type[1] = 9;
	m.data_type[2] = PSL_WIRE_INT32;
	buf = encode(&m, &len);
	assert_int_equal(len, 112 + strlen(body) + 12);

	assert_int_equal(decode(buf, len, &d), 0);
	assert_int_equal(d.head, 42);
	assert_int_equal(d.app_id, 3);
	assert_int_equal(d.customer_id, 5);
	assert_int_equal(d.timestamp, 123456);
	assert_true(d.request);
	assert_true(d.push);
	assert_false(d.simple_app);
	assert_int_equal(d.src_dev_type, PSL_DEV_CPU);
	assert_int_equal(d.src_dev_id, 0);
	assert_int_equal(d.dst_dev_type, PSL_DEV_GPU);
	assert_int_equal(d.dst_dev_id, 7);
	assert_int_equal(d.data_size, 4000);
	assert_true(d.key == 0xFEDCBA9876543210ull);
	assert_true(d.addr == 0x00007f0011223344ull);
	assert_int_equal(d.val_len, 1000);
	assert_int_equal(d.option, -17);
	assert_int_equal(d.sid, 99);
	assert_int_equal(d.body_size, (int)strlen(body));
	assert_int_equal(d.data_type_size, 3);
	assert_int_equal(d.data_type[0], 8);
	assert_int_equal(d.data_type[1], 9);
	assert_int_equal(d.data_type[2], 3);
	assert_int_equal(d.cmd, PSL_CMD_EMPTY);
	assert_int_equal(d.node_size, 0);
	assert_null(d.nodes);
	/* the body points into the frame: compare before it goes away */
	free(buf);

	/* again, keeping the buffer to look at the body */
	buf = encode(&m, &len);
	assert_int_equal(psl__meta_decode(buf, len, &d, why, sizeof(why)), 0);
	assert_true(d.body == (const char *)buf + 112);
	assert_memory_equal(d.body, body, strlen(body));
	/* a data message carries no control fields even if they are set */
	free(buf);
	m.barrier_group = 4;
	m.msg_sig = 77;
	m.node_size = 2; /* ignored for EMPTY: no nodes are written */
	buf = encode(&m, &len);
	assert_int_equal(len, 112 + strlen(body) + 12);
	assert_int_equal(decode(buf, len, &d), 0);
	assert_int_equal(d.barrier_group, 0);
	assert_true(d.msg_sig == 0);
	assert_int_equal(d.node_size, 0);
	free(buf);
}

static void test_defaults_round_trip(void **state)
{
	struct psl__meta m, d;
	uint8_t *buf;
	size_t len;
	(void)state;
	psl__meta_init(&m);
	assert_int_equal(m.head, PSL_EMPTY);
	assert_int_equal(m.app_id, PSL_EMPTY);
	assert_int_equal(m.customer_id, PSL_EMPTY);
	assert_int_equal(m.src_dev_id, -1);
	assert_int_equal(m.dst_dev_id, -1);
	buf = encode(&m, &len);
	assert_int_equal(len, 112);
	assert_int_equal(decode(buf, len, &d), 0);
	assert_int_equal(d.head, PSL_EMPTY);
	assert_int_equal(d.app_id, PSL_EMPTY);
	assert_int_equal(d.customer_id, PSL_EMPTY);
	assert_int_equal(d.timestamp, PSL_EMPTY);
	assert_int_equal(d.src_dev_id, -1);
	assert_false(d.request);
	assert_null(d.body);
	free(buf);
}

static void test_node_list_round_trip(void **state)
{
	struct psl__node nodes[4];
	struct psl__meta m, d;
	uint8_t *buf;
	size_t len;
	int i;
	(void)state;

	fill_node(&nodes[0], 1, 9, "10.0.0.1", 4001);
	fill_node(&nodes[1], 0, 8, "host-with-a-longer-name.example.org", 65535);
	nodes[1].is_recovery = true;
	nodes[1].customer_id = 3;
	nodes[1].aux_id = 0;
	nodes[1].addr_len = 64;
	for (i = 0; i < 64; i++)
		nodes[1].addr[i] = (uint8_t)(i * 7 + 1);
	fill_node(&nodes[2], 0, 32767, "", 0); /* unassigned, as in a registration */
	fill_node(&nodes[3], 2, 1, "127.0.0.1", 9000);
	memset(nodes[3].hostname, 0, sizeof(nodes[3].hostname));
	memset(nodes[3].hostname, 'x', 63); /* the longest host name */
	nodes[3].addr_len = 5;
	memcpy(nodes[3].addr, "abcde", 5);
	nodes[3].first_port = 8999;

	psl__meta_init(&m);
	m.cmd = PSL_CMD_ADD_NODE;
	m.nodes = nodes;
	m.node_size = 4;
	m.timestamp = 2;
	buf = encode(&m, &len);
	assert_int_equal(len, 112 + 4 * 552);
	assert_int_equal(decode(buf, len, &d), 0);
	assert_int_equal(d.cmd, PSL_CMD_ADD_NODE);
	assert_int_equal(d.node_size, 4);
	assert_non_null(d.nodes);
	for (i = 0; i < 4; i++)
		assert_node_equal(&d.nodes[i], &nodes[i]);
	assert_int_equal(d.barrier_group, 0);
	psl__meta_clear(&d);
	assert_null(d.nodes);
	assert_int_equal(d.node_size, 0);

	/* the RawNode bytes that ps-lite reads: num_ports 1, scheduler CPU 0 */
	{
		const uint8_t *n3 = buf + 112 + 3 * 552;
		int32_t v;
		memcpy(&v, n3 + 72, 4);
		assert_int_equal(v, 1);
		memcpy(&v, n3 + 76, 4);
		assert_int_equal(v, 8999);
		memcpy(&v, n3 + 204, 4);
		assert_int_equal(v, 9000);
		memcpy(&v, n3 + 208, 4);
		assert_int_equal(v, PSL_DEV_CPU);
		assert_int_equal(n3[8 + 63], 0);
	}
	/* a node list after a body with an odd length: misaligned records */
	free(buf);
	m.body = "abc";
	m.body_size = 3;
	m.data_type_size = 1;
	m.data_type[0] = 11;
	buf = encode(&m, &len);
	assert_int_equal(len, 112 + 3 + 4 + 4 * 552);
	assert_int_equal(decode(buf, len, &d), 0);
	for (i = 0; i < 4; i++)
		assert_node_equal(&d.nodes[i], &nodes[i]);
	psl__meta_clear(&d);
	free(buf);
}

static void test_control_round_trips(void **state)
{
	struct psl__meta m, d;
	uint8_t *buf;
	size_t len;
	int32_t v;
	uint64_t sig;
	(void)state;

	/* ACK: msg_sig, and no barrier group */
	psl__meta_init(&m);
	m.cmd = PSL_CMD_ACK;
	m.msg_sig = 0xFFFFFFFF80000003ull;
	m.barrier_group = 5;
	buf = encode(&m, &len);
	assert_int_equal(len, 112);
	memcpy(&sig, buf + 24, 8);
	assert_true(sig == 0xFFFFFFFF80000003ull);
	memcpy(&v, buf + 16, 4);
	assert_int_equal(v, 0);
	assert_int_equal(decode(buf, len, &d), 0);
	assert_int_equal(d.cmd, PSL_CMD_ACK);
	assert_true(d.msg_sig == 0xFFFFFFFF80000003ull);
	free(buf);

	/* barriers: group, and no msg_sig */
	psl__meta_init(&m);
	m.cmd = PSL_CMD_INSTANCE_BARRIER;
	m.barrier_group = 7;
	m.msg_sig = 12;
	m.request = true;
	m.app_id = 0;
	m.customer_id = 0;
	buf = encode(&m, &len);
	memcpy(&v, buf + 8, 4);
	assert_int_equal(v, 9);
	memcpy(&v, buf + 16, 4);
	assert_int_equal(v, 7);
	memcpy(&sig, buf + 24, 8);
	assert_true(sig == 0);
	assert_int_equal(decode(buf, len, &d), 0);
	assert_int_equal(d.cmd, PSL_CMD_INSTANCE_BARRIER);
	assert_int_equal(d.barrier_group, 7);
	assert_true(d.request);
	assert_int_equal(d.app_id, 0);
	free(buf);

	m.cmd = PSL_CMD_BARRIER;
	m.barrier_group = 4;
	buf = encode(&m, &len);
	assert_int_equal(decode(buf, len, &d), 0);
	assert_int_equal(d.cmd, PSL_CMD_BARRIER);
	assert_int_equal(d.barrier_group, 4);
	free(buf);

	/* other commands carry neither */
	m.cmd = PSL_CMD_HEARTBEAT;
	buf = encode(&m, &len);
	assert_int_equal(decode(buf, len, &d), 0);
	assert_int_equal(d.cmd, PSL_CMD_HEARTBEAT);
	assert_int_equal(d.barrier_group, 0);
	free(buf);

	/* every command number decodes */
	for (v = 0; v <= PSL_CMD_MAX; v++) {
		m.cmd = v;
		buf = encode(&m, &len);
		assert_int_equal(decode(buf, len, &d), 0);
		assert_int_equal(d.cmd, v);
		assert_string_not_equal(psl__cmd_name(v), "UNKNOWN");
		free(buf);
	}
	assert_string_equal(psl__cmd_name(PSL_CMD_INSTANCE_BARRIER), "INSTANCE_BARRIER");
	assert_string_equal(psl__cmd_name(10), "UNKNOWN");
	assert_string_equal(psl__cmd_name(-1), "UNKNOWN");
}

/* -------------------------------------------- docs/wire.md 4.8 exact bytes -- */

static void test_wire_example(void **state)
{
	/* the KV push of docs/wire.md 4.8, KVWorker<float> push of keys {1,3} */
	static const uint8_t want[124] = {
		/* 000 */ 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		/* 010 */ 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		/* 020 */ 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
		/* 030 */ 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		/* 040 */ 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
		0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		/* 050 */ 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
		/* 060 */ 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		/* 070 */ 0x08, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00,
		0x03, 0x00, 0x00, 0x00,
	};
	struct psl__meta m, d;
	uint8_t *buf;
	size_t len, i;
	(void)state;

	psl__meta_init(&m);
	m.head = 0;
	m.app_id = 0;
	m.customer_id = 0;
	m.timestamp = 0;
	m.request = true;
	m.push = true;
	m.src_dev_type = PSL_DEV_CPU;
	m.src_dev_id = 0;
	m.dst_dev_type = PSL_DEV_CPU;
	m.dst_dev_id = 0;
	m.data_size = 40; /* 16 B keys + 16 B floats + 8 B lens */
	m.key = 0;	  /* "forced to 0 for the dump" */
	m.addr = 0x1122334455667788ull; /* "arbitrary": the dump's value */
	m.val_len = 4;
	m.option = 0;
	m.sid = 0;
	m.data_type_size = 3;
	m.data_type[0] = 8; /* UINT64 keys */
	m.data_type[1] = 9; /* FLOAT */
	m.data_type[2] = 3; /* INT32 lens */
	buf = encode(&m, &len);
	assert_int_equal(len, 124);
	for (i = 0; i < len; i++)
		if (buf[i] != want[i])
			fail_msg("byte 0x%03zx is 0x%02x, wire.md 4.8 says 0x%02x", i, buf[i],
				 want[i]);
	/* and the dump decodes to the same meta */
	assert_int_equal(decode(want, sizeof(want), &d), 0);
	assert_true(d.request && d.push && !d.simple_app);
	assert_int_equal(d.data_type_size, 3);
	assert_int_equal(d.data_size, 40);
	assert_int_equal(d.val_len, 4);
	assert_true(d.addr == 0x1122334455667788ull);
	free(buf);
}

/* ------------------------------------------------------------ malformed -- */

/* A valid ADD_NODE with two nodes, a body and two data types. */
static uint8_t *valid_control(size_t *len)
{
	static struct psl__node nodes[2];
	struct psl__meta m;
	fill_node(&nodes[0], 1, 9, "10.0.0.1", 4001);
	fill_node(&nodes[1], 2, 1, "10.0.0.2", 9000);
	psl__meta_init(&m);
	m.cmd = PSL_CMD_ADD_NODE;
	m.nodes = nodes;
	m.node_size = 2;
	m.body = "xy";
	m.body_size = 2;
	m.data_type_size = 2;
	m.data_type[0] = 8;
	m.data_type[1] = 0;
	return encode(&m, len);
}

#define NODE0 (112 + 2 + 8)

/* The frame must be rejected with -EBADMSG, why mentioning needle, and no
 * node list left allocated. */
static void expect_bad(const uint8_t *buf, size_t len, const char *needle)
{
	struct psl__meta d;
	int rc = decode(buf, len, &d);
	if (rc != -EBADMSG)
		fail_msg("decode of %zu bytes returned %d, expected -EBADMSG (want \"%s\")", len,
			 rc, needle);
	assert_null(d.nodes);
	assert_int_equal(d.node_size, 0);
	assert_true(strlen(why) > 0);
	assert_contains(why, needle);
}

static void test_short_frames(void **state)
{
	uint8_t *good;
	size_t len, n;
	char want[64];
	struct psl__meta d;
	(void)state;
	good = valid_control(&len);
	assert_int_equal(decode(good, len, &d), 0);
	psl__meta_clear(&d);
	/* every length below the fixed part */
	for (n = 0; n < 112; n++) {
		snprintf(want, sizeof(want), "meta is %zu bytes, expected at least 112", n);
		expect_bad(good, n, want);
	}
	/* every truncation of a full frame, and one byte too many */
	for (n = 112; n < len; n++)
		expect_bad(good, n, "but its counts");
	{
		uint8_t *longer = calloc(1, len + 1);
		memcpy(longer, good, len);
		expect_bad(longer, len + 1, "but its counts");
		free(longer);
	}
	/* NULL buffer with length 0 is just short */
	why[0] = 0;
	assert_int_equal(psl__meta_decode(NULL, 0, &d, why, sizeof(why)), -EBADMSG);
	free(good);
}

/* Patches one field of a valid frame and expects it rejected. */
static void patch32(size_t off, int32_t v, const char *needle)
{
	size_t len;
	uint8_t *b = valid_control(&len);
	put32(b, off, v);
	expect_bad(b, len, needle);
	free(b);
}
static void patch8(size_t off, uint8_t v, const char *needle)
{
	size_t len;
	uint8_t *b = valid_control(&len);
	b[off] = v;
	expect_bad(b, len, needle);
	free(b);
}

static void test_bad_counts(void **state)
{
	(void)state;
	patch32(4, -1, "body_size -1 is negative");
	patch32(4, INT_MIN, "is negative");
	patch32(4, 3, "counts (body 3");
	patch32(4, 1, "counts (body 1");
	patch32(4, INT_MAX, "counts (body 2147483647");
	patch32(44, -1, "data_type_size -1");
	patch32(44, 17, "data_type_size 17, expected 0 to 16");
	patch32(44, INT_MAX, "data_type_size 2147483647");
	patch32(44, 3, "data types 3");
	patch32(44, 0, "data types 0");
	patch32(12, -1, "node_size -1 is negative");
	patch32(12, INT_MIN, "node_size");
	patch32(12, 3, "nodes 3");
	patch32(12, 1, "nodes 1");
	patch32(12, INT_MAX, "nodes 2147483647");
	patch32(72, -40, "data_size -40 is negative");
}

static void test_bad_commands(void **state)
{
	(void)state;
	patch32(8, 10, "unknown command 10");
	patch32(8, -1, "unknown command -1");
	patch32(8, 0x7fffffff, "unknown command 2147483647");
	/* cmd EMPTY does not carry nodes: the node records are then extra */
	patch32(8, 0, "but its counts");
}

static void test_bad_bools(void **state)
{
	(void)state;
	patch8(32, 2, "field request is 2, expected 0 or 1");
	patch8(32, 0xff, "field request is 255");
	patch8(68, 2, "field push is 2");
	patch8(69, 7, "field simple_app is 7");
	patch8(NODE0 + 464, 2, "field is_recovery is 2");
	patch8(NODE0 + 552 + 464, 0x80, "field is_recovery is 128");
}

static void test_bad_devices_and_types(void **state)
{
	(void)state;
	patch32(48, -1, "device type -1/");
	patch32(48, 3, "device type 3/");
	patch32(56, 3, "device type 0/3");
	patch32(56, -7, "/-7");
	patch32(112 + 2, -1, "data type 0 is -1, expected 0 to 14");
	patch32(112 + 2 + 4, 15, "data type 1 is 15, expected 0 to 14");
	patch32(112 + 2 + 4, INT_MIN, "data type 1 is");
}

static void test_bad_nodes(void **state)
{
	static const int bad_ids[] = {0, 2, 3, 4, 5, 6, 7, -1, 32768, INT_MAX, INT_MIN};
	size_t i;
	char want[64];
	(void)state;
	patch32(NODE0 + 0, -1, "node 0: role -1, expected 0, 1 or 2");
	patch32(NODE0 + 0, 3, "node 0: role 3");
	patch32(NODE0 + 552 + 0, 99, "node 1: role 99");
	for (i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		snprintf(want, sizeof(want), "node 1: id %d is out of range", bad_ids[i]);
		patch32(NODE0 + 552 + 4, bad_ids[i], want);
	}
	patch32(NODE0 + 204, -1, "node 0: port -1 is out of range");
	patch32(NODE0 + 552 + 204, 65536, "node 1: port 65536 is out of range");
	/* hostname with no NUL in its 64 bytes */
	{
		size_t len;
		uint8_t *b = valid_control(&len);
		memset(b + NODE0 + 552 + 8, 'h', 64);
		expect_bad(b, len, "node 1: hostname is not terminated within 64 bytes");
		free(b);
	}
	/* endpoint_name_len past 64, in every byte of the 8 */
	{
		size_t len;
		uint8_t *b = valid_control(&len);
		put64(b, NODE0 + 536, 65);
		expect_bad(b, len, "node 0: endpoint_name_len 65, expected at most 64");
		free(b);
		for (i = 1; i < 8; i++) {
			b = valid_control(&len);
			b[NODE0 + 552 + 536 + i] = 1;
			expect_bad(b, len, "node 1: endpoint_name_len");
			free(b);
		}
	}
}

/* What decode accepts at the edges. */
static void test_edges_accepted(void **state)
{
	size_t len;
	uint8_t *b;
	struct psl__meta d;
	(void)state;
	/* ids 1, 8, 32766 and 32767 (unassigned) are all fine; so are ports 0
	 * and 65535, endpoint_name_len 64, and a 63-byte hostname */
	b = valid_control(&len);
	put32(b, NODE0 + 4, 32766);
	put32(b, NODE0 + 204, 65535);
	put64(b, NODE0 + 536, 64);
	memset(b + NODE0 + 8, 'a', 63);
	put32(b, NODE0 + 552 + 4, 32767);
	put32(b, NODE0 + 552 + 204, 0);
	assert_int_equal(decode(b, len, &d), 0);
	assert_int_equal(d.nodes[0].id, 32766);
	assert_int_equal(d.nodes[0].addr_len, 64);
	assert_int_equal(strlen(d.nodes[0].hostname), 63);
	assert_int_equal(d.nodes[1].id, 32767);
	psl__meta_clear(&d);
	free(b);
	/* a data message with node_size set but no nodes: node_size ignored */
	{
		struct psl__meta m;
		psl__meta_init(&m);
		b = encode(&m, &len);
		put32(b, 12, 5);
		assert_int_equal(decode(b, len, &d), 0);
		assert_int_equal(d.node_size, 0);
		assert_null(d.nodes);
		free(b);
	}
	/* 16 data types fit */
	{
		struct psl__meta m;
		int i;
		psl__meta_init(&m);
		m.data_type_size = 16;
		for (i = 0; i < 16; i++)
			m.data_type[i] = i % 12;
		b = encode(&m, &len);
		assert_int_equal(len, 112 + 64);
		assert_int_equal(decode(b, len, &d), 0);
		assert_int_equal(d.data_type[15], 3);
		free(b);
	}
}

/* -------------------------------------------------------------- msg_sig -- */

static void test_msg_sig(void **state)
{
	(void)state;
	/* app 0, worker 9 -> server 8, ts 5, request: (5 << 1) | 1 = 0xB */
	assert_true(psl__msg_sig(0, 9, 8, 5, true) == 0x000009080000000Bull);
	assert_true(psl__msg_sig(0, 9, 8, 5, false) == 0x000009080000000Aull);
	/* control messages: app 32767 = 0x7FFF in bits 63..48 */
	assert_true(psl__msg_sig(32767, 1, 9, 0, false) == 0x7FFF010900000000ull);
	/* ids truncated to 8 bits: 300 -> 0x2C, 257 -> 0x01 */
	assert_true(psl__msg_sig(1, 300, 257, 1, true) == 0x00012C0100000003ull);
	/* app_id truncated to 16 bits: 0x12345 -> 0x2345; -1 -> 0xFFFF */
	assert_true(psl__msg_sig(0x12345, 8, 9, 0, false) == 0x2345080900000000ull);
	assert_true(psl__msg_sig(-1, 0, 0, 0, false) == 0xFFFF000000000000ull);
	/* the largest timestamp that stays clean: 2^30 - 1 */
	assert_true(psl__msg_sig(0, 9, 8, 0x3FFFFFFF, true) == 0x000009087FFFFFFFull);
	/* the sign-extension quirk: ts >= 2^30 makes (ts << 1) negative as an
	 * int32, and widening it sets bits 63..32, hiding app and ids */
	assert_true(psl__msg_sig(0, 9, 8, 0x40000000, false) == 0xFFFFFFFF80000000ull);
	assert_true(psl__msg_sig(0, 9, 8, 0x40000001, true) == 0xFFFFFFFF80000003ull);
	assert_true(psl__msg_sig(5, 10, 11, 0x7FFFFFFF, true) == 0xFFFFFFFFFFFFFFFFull);
	/* ts 2^31 - 2^30: bit 31 of ts is shifted out */
	assert_true(psl__msg_sig(0, 0, 0, (int)0x80000001u, false) == 0x0000000000000002ull);
	/* 32767, the timestamp of TERMINATE and ACK */
	assert_true(psl__msg_sig(32767, 9, 9, 32767, false) == 0x7FFF09090000FFFEull);
}

/* A node list of 200 servers and workers plus the scheduler encodes to
 * 112 + 552 * 201 bytes (the size pslite-vantest's node-list case sends
 * through every van) and decodes to the same 201 nodes. */
static void test_node_list_200(void **state)
{
	enum { N = 201 };
	struct psl__node *nodes = calloc(N, sizeof(*nodes));
	struct psl__meta m, d;
	uint8_t *buf;
	char err[128];
	size_t len;
	int i;
	(void)state;

	assert_non_null(nodes);
	for (i = 0; i < N; i++) {
		nodes[i].role = i == N - 1 ? 2 : i % 2;
		nodes[i].id = i == N - 1 ? 1 : 8 + i;
		snprintf(nodes[i].hostname, sizeof(nodes[i].hostname), "10.1.%d.%d", i / 250, i % 250);
		nodes[i].port = 20000 + i;
		nodes[i].aux_id = -1;
	}
	psl__meta_init(&m);
	m.cmd = PSL_CMD_ADD_NODE;
	m.nodes = nodes;
	m.node_size = N;
	len = psl__meta_size(&m);
	assert_int_equal(len, 112 + 552 * 201);
	buf = malloc(len);
	assert_non_null(buf);
	assert_int_equal(psl__meta_encode(&m, buf), len);
	assert_int_equal(psl__meta_decode(buf, len, &d, err, sizeof(err)), 0);
	assert_int_equal(d.node_size, N);
	for (i = 0; i < N; i++) {
		assert_int_equal(d.nodes[i].id, nodes[i].id);
		assert_int_equal(d.nodes[i].port, nodes[i].port);
		assert_string_equal(d.nodes[i].hostname, nodes[i].hostname);
	}
	psl__meta_clear(&d);
	free(buf);
	free(nodes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_data_round_trip),
		cmocka_unit_test(test_defaults_round_trip),
		cmocka_unit_test(test_node_list_round_trip),
		cmocka_unit_test(test_node_list_200),
		cmocka_unit_test(test_control_round_trips),
		cmocka_unit_test(test_wire_example),
		cmocka_unit_test(test_short_frames),
		cmocka_unit_test(test_bad_counts),
		cmocka_unit_test(test_bad_commands),
		cmocka_unit_test(test_bad_bools),
		cmocka_unit_test(test_bad_devices_and_types),
		cmocka_unit_test(test_bad_nodes),
		cmocka_unit_test(test_edges_accepted),
		cmocka_unit_test(test_msg_sig),
	};
	return cmocka_run_group_tests_name("message", tests, NULL, NULL);
}
