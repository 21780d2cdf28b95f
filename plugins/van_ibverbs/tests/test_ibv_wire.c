/* Unit tests of van_ibverbs's wire records (ibv_wire.c), incl. malformed ones. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ibv_cxx.h"
#include "ibv_wire.h"

static void test_conn_roundtrip(void **state)
{
	struct ibv_conn_req r = {.qp_index = 1, .nqp = 2, .sender = 9, .rx_depth = 256,
				 .rx_buf = 8704, .nonce = 0x1122334455667788ull};
	struct ibv_conn_req o;
	struct ibv_conn_acc a = {.qp_index = 1, .nqp = 2, .rx_depth = 64, .rx_buf = 64}, ao;
	uint8_t b[64];
	const char *why = "";
	(void)state;

	assert_int_equal(ibv_conn_req_encode(b, &r), IBV_CONN_REQ_LEN);
	assert_true(IBV_CONN_REQ_LEN <= 56); /* rdmacm's limit on a request */
	assert_int_equal(ibv_conn_req_decode(b, IBV_CONN_REQ_LEN, &o, &why), 0);
	assert_int_equal(o.qp_index, 1);
	assert_int_equal(o.nqp, 2);
	assert_int_equal(o.sender, 9);
	assert_int_equal(o.rx_depth, 256);
	assert_int_equal(o.rx_buf, 8704);
	assert_true(o.nonce == r.nonce);
	/* rdmacm pads private data: longer is fine */
	memset(b + IBV_CONN_REQ_LEN, 0, 20);
	assert_int_equal(ibv_conn_req_decode(b, 48, &o, &why), 0);
	/* the "no id yet" sender is valid */
	r.sender = 32767;
	ibv_conn_req_encode(b, &r);
	assert_int_equal(ibv_conn_req_decode(b, IBV_CONN_REQ_LEN, &o, &why), 0);

	assert_int_equal(ibv_conn_acc_encode(b, &a), IBV_CONN_ACC_LEN);
	assert_int_equal(ibv_conn_acc_decode(b, IBV_CONN_ACC_LEN, &ao, &why), 0);
	assert_int_equal(ao.rx_depth, 64);
	assert_int_equal(ao.rx_buf, 64);

	assert_int_equal(ibv_conn_rej_encode(b, IBV_REJ_VERSION), IBV_CONN_REJ_LEN);
	assert_int_equal(ibv_conn_rej_decode(b, IBV_CONN_REJ_LEN), IBV_REJ_VERSION);
	assert_int_equal(ibv_conn_rej_decode(b, 3), -1);
	assert_int_equal(ibv_conn_rej_decode(NULL, 0), -1);
	memcpy(b, "XXXX", 4);
	assert_int_equal(ibv_conn_rej_decode(b, IBV_CONN_REJ_LEN), -1);
}

/* With a job secret the request carries the proof record after the link
 * nonce (the nonce's first half): 52 bytes, within rdmacm's 56. */
static void test_conn_proof(void **state)
{
	struct ibv_conn_req r = {.qp_index = 0, .nqp = 1, .sender = 9, .rx_depth = 64,
				 .rx_buf = 8704, .nonce = 0x0102030405060708ull,
				 .flags = IBV_REQ_F_PROOF},
			    o;
	uint8_t b[64];
	const char *why = "";
	int i;
	(void)state;
	psl_van_put_le64(r.proof, r.nonce);
	for (i = 8; i < PSL_VAN_PROOF_LEN; i++)
		r.proof[i] = (uint8_t)(0xa0 + i);
	assert_int_equal(ibv_conn_req_encode(b, &r), IBV_CONN_REQ_PROOF_LEN);
	assert_true(IBV_CONN_REQ_PROOF_LEN <= 56);
	assert_int_equal(ibv_conn_req_decode(b, 56, &o, &why), 0);
	assert_int_equal(o.flags, IBV_REQ_F_PROOF);
	assert_memory_equal(o.proof, r.proof, PSL_VAN_PROOF_LEN);
	assert_true(o.nonce == r.nonce);
	/* the proof cut off, or a flag this version does not know */
	assert_int_equal(ibv_conn_req_decode(b, IBV_CONN_REQ_PROOF_LEN - 1, &o, &why), -EPROTO);
	b[7] = 3;
	assert_int_equal(ibv_conn_req_decode(b, 56, &o, &why), -EPROTO);
	/* without the flag the same bytes are a request without a proof */
	b[7] = 0;
	assert_int_equal(ibv_conn_req_decode(b, 56, &o, &why), 0);
	assert_int_equal(o.flags, 0);
	assert_int_equal(ibv_conn_rej_encode(b, IBV_REJ_BAD_PROOF), IBV_CONN_REJ_LEN);
	assert_int_equal(ibv_conn_rej_decode(b, IBV_CONN_REJ_LEN), IBV_REJ_BAD_PROOF);
}

static void test_conn_malformed(void **state)
{
	struct ibv_conn_req r = {.qp_index = 0, .nqp = 1, .sender = 8, .rx_depth = 16,
				 .rx_buf = 64, .nonce = 1};
	struct ibv_conn_req o;
	uint8_t b[64], c[64];
	const char *why = "";
	(void)state;

	ibv_conn_req_encode(b, &r);
	/* short */
	assert_int_equal(ibv_conn_req_decode(b, IBV_CONN_REQ_LEN - 1, &o, &why), -EPROTO);
	assert_int_equal(ibv_conn_req_decode(b, 0, &o, &why), -EPROTO);
	/* not ours (a C++ ps-lite node's private data, say) */
	memcpy(c, b, sizeof(c));
	c[0] = 'X';
	assert_int_equal(ibv_conn_req_decode(c, IBV_CONN_REQ_LEN, &o, &why), -EPROTO);
	/* another version */
	memcpy(c, b, sizeof(c));
	c[4] = 9;
	assert_int_equal(ibv_conn_req_decode(c, IBV_CONN_REQ_LEN, &o, &why), -EPROTONOSUPPORT);
	/* index out of range */
	memcpy(c, b, sizeof(c));
	c[5] = 1;
	assert_int_equal(ibv_conn_req_decode(c, IBV_CONN_REQ_LEN, &o, &why), -EPROTO);
	memcpy(c, b, sizeof(c));
	c[6] = 0;
	assert_int_equal(ibv_conn_req_decode(c, IBV_CONN_REQ_LEN, &o, &why), -EPROTO);
	memcpy(c, b, sizeof(c));
	c[6] = IBV_MAX_QPS + 1;
	assert_int_equal(ibv_conn_req_decode(c, IBV_CONN_REQ_LEN, &o, &why), -EPROTO);
	/* sender 0 or negative */
	r.sender = 0;
	ibv_conn_req_encode(c, &r);
	assert_int_equal(ibv_conn_req_decode(c, IBV_CONN_REQ_LEN, &o, &why), -EPROTO);
	r.sender = -5;
	ibv_conn_req_encode(c, &r);
	assert_int_equal(ibv_conn_req_decode(c, IBV_CONN_REQ_LEN, &o, &why), -EPROTO);
	/* depth zero, buffer too small */
	r.sender = 8;
	r.rx_depth = 0;
	ibv_conn_req_encode(c, &r);
	assert_int_equal(ibv_conn_req_decode(c, IBV_CONN_REQ_LEN, &o, &why), -EPROTO);
	r.rx_depth = 16;
	r.rx_buf = 8;
	ibv_conn_req_encode(c, &r);
	assert_int_equal(ibv_conn_req_decode(c, IBV_CONN_REQ_LEN, &o, &why), -EPROTO);
}

static void test_msg_roundtrip(void **state)
{
	uint8_t buf[8704], small[4] = {1, 2, 3, 4}, big[100];
	char meta[] = "meta-bytes";
	struct ibv_wseg s[4] = {
		{.len = 4, .data = small},
		{.len = 0, .data = NULL},
		{.len = 1 << 20, .addr = 0x7f0000001000ull, .rkey = 0x1234, .remote = true},
		{.len = 100, .data = big},
	};
	struct ibv_msg_hdr h = {.credits = 7, .nseg = 4, .seq = 42, .meta_len = sizeof(meta),
				.token = 5};
	struct ibv_msg_hdr o;
	struct ibv_wseg d[IBV_MAX_SEGS];
	const void *m;
	const char *why = "";
	size_t n;
	int i;
	(void)state;

	for (i = 0; i < 100; i++)
		big[i] = (uint8_t)(i * 7);
	n = ibv_msg_size(4, sizeof(meta), s);
	assert_int_equal(n, IBV_MSG_HDR_LEN + 4 * IBV_SEG_DESC_LEN + sizeof(meta) + 4 + 100);
	assert_int_equal(ibv_msg_encode(buf, sizeof(buf), &h, meta, s), n);
	assert_int_equal(ibv_msg_encode(buf, n - 1, &h, meta, s), 0); /* does not fit */
	assert_int_equal(ibv_msg_decode(buf, n, &o, d, &m, &why), 0);
	assert_int_equal(o.credits, 7);
	assert_int_equal(o.nseg, 4);
	assert_true(o.seq == 42);
	assert_true(o.token == 5);
	assert_memory_equal(m, meta, sizeof(meta));
	assert_int_equal(d[0].len, 4);
	assert_false(d[0].remote);
	assert_memory_equal(d[0].data, small, 4);
	assert_int_equal(d[1].len, 0);
	assert_true(d[2].remote);
	assert_true(d[2].addr == 0x7f0000001000ull);
	assert_int_equal(d[2].rkey, 0x1234);
	assert_int_equal(d[2].len, 1 << 20);
	assert_memory_equal(d[3].data, big, 100);

	/* control records */
	{
		int type;
		uint16_t cr;
		int32_t st;
		uint64_t tok;
		assert_int_equal(ibv_fin_encode(buf, 3, -5, 77), IBV_FIN_LEN);
		assert_int_equal(ibv_rec_peek(buf, IBV_FIN_LEN, &type, &cr, &st, &tok, &why), 0);
		assert_int_equal(type, IBV_REC_FIN);
		assert_int_equal(cr, 3);
		assert_int_equal(st, -5);
		assert_true(tok == 77);
		assert_int_equal(ibv_credit_encode(buf, 65535), IBV_CREDIT_LEN);
		assert_int_equal(ibv_rec_peek(buf, IBV_CREDIT_LEN, &type, &cr, &st, &tok, &why), 0);
		assert_int_equal(type, IBV_REC_CREDIT);
		assert_int_equal(cr, 65535);
	}
}

static void test_msg_malformed(void **state)
{
	uint8_t buf[1024], c[1024], data[8] = {0};
	struct ibv_wseg s[2] = {
		{.len = 8, .data = data},
		{.len = 4096, .addr = 0x1000, .rkey = 1, .remote = true},
	};
	struct ibv_msg_hdr h = {.nseg = 2, .seq = 1, .meta_len = 3, .token = 9};
	struct ibv_msg_hdr o;
	struct ibv_wseg d[IBV_MAX_SEGS];
	const void *m;
	const char *why = "";
	size_t n, i;
	int type;
	uint16_t cr;
	int32_t st;
	uint64_t tok;
	(void)state;

	n = ibv_msg_encode(buf, sizeof(buf), &h, "abc", s);
	assert_true(n > 0);
	assert_int_equal(ibv_msg_decode(buf, n, &o, d, &m, &why), 0);
	/* every truncation fails, none crashes */
	for (i = 0; i < n; i++)
		assert_int_equal(ibv_msg_decode(buf, i, &o, d, &m, &why), -EPROTO);
	/* trailing garbage */
	assert_int_equal(ibv_msg_decode(buf, n + 1, &o, d, &m, &why), -EPROTO);
	/* too many segments */
	memcpy(c, buf, n);
	c[4] = IBV_MAX_SEGS + 1;
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	/* a huge meta length */
	memcpy(c, buf, n);
	c[16] = c[17] = c[18] = c[19] = 0xff;
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	/* an inline segment longer than the record */
	memcpy(c, buf, n);
	c[IBV_MSG_HDR_LEN] = 200;
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	/* unknown flags */
	memcpy(c, buf, n);
	c[IBV_MSG_HDR_LEN + 20] = 2;
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	/* rendezvous segment without a token */
	memcpy(c, buf, n);
	memset(c + 24, 0, 8);
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	/* rendezvous segment of length 0, or at address 0 */
	memcpy(c, buf, n);
	memset(c + IBV_MSG_HDR_LEN + IBV_SEG_DESC_LEN, 0, 8);
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	memcpy(c, buf, n);
	memset(c + IBV_MSG_HDR_LEN + IBV_SEG_DESC_LEN + 8, 0, 8);
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	/* an inline segment with an address */
	memcpy(c, buf, n);
	c[IBV_MSG_HDR_LEN + 8] = 1;
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	/* other record types */
	memcpy(c, buf, n);
	c[0] = 9;
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	assert_int_equal(ibv_rec_peek(c, n, &type, &cr, &st, &tok, &why), -EPROTO);
	assert_int_equal(ibv_rec_peek(c, 2, &type, &cr, &st, &tok, &why), -EPROTO);
	/* FIN: wrong length, token 0, positive status */
	ibv_fin_encode(c, 0, 0, 5);
	assert_int_equal(ibv_rec_peek(c, IBV_FIN_LEN - 1, &type, &cr, &st, &tok, &why), -EPROTO);
	ibv_fin_encode(c, 0, 0, 0);
	assert_int_equal(ibv_rec_peek(c, IBV_FIN_LEN, &type, &cr, &st, &tok, &why), -EPROTO);
	ibv_fin_encode(c, 0, 5, 1);
	assert_int_equal(ibv_rec_peek(c, IBV_FIN_LEN, &type, &cr, &st, &tok, &why), -EPROTO);
	ibv_credit_encode(c, 1);
	assert_int_equal(ibv_rec_peek(c, IBV_CREDIT_LEN + 1, &type, &cr, &st, &tok, &why),
			 -EPROTO);
	/* random garbage never crashes the decoder */
	srand(1);
	for (i = 0; i < 20000; i++) {
		size_t k, len = (size_t)rand() % 300;
		for (k = 0; k < len; k++)
			c[k] = (uint8_t)rand();
		if (len)
			c[0] = IBV_REC_MSG;
		if (len > 4)
			c[4] = (uint8_t)(c[4] % 4), c[5] = c[6] = c[7] = 0;
		if (len > 19)
			c[17] = c[18] = c[19] = 0;
		if (ibv_msg_decode(c, len, &o, d, &m, &why) == 0) {
			uint32_t j;
			assert_true(o.nseg <= IBV_MAX_SEGS);
			for (j = 0; j < o.nseg; j++)
				if (!d[j].remote)
					assert_true((const uint8_t *)d[j].data + d[j].len <= c + len);
		}
	}
}

/* C++ ps-lite's connection record: its layout, and that it and ours are told
 * apart both ways. */
static void test_cxx_conn(void **state)
{
	struct ibv_cxx_conn c = {.node = 9, .port = 0x1234}, o;
	struct ibv_conn_req r = {.qp_index = 0, .nqp = 1, .sender = 9, .rx_depth = 256,
				 .rx_buf = 8704, .nonce = 7};
	struct ibv_conn_req ro;
	uint8_t b[56], g[IBV_CXX_REQ_LEN];
	const char *why = "";
	(void)state;

	strcpy(c.host, "10.0.0.5");
	memset(b, 0xee, sizeof(b));
	assert_int_equal(ibv_cxx_conn_encode(b, &c), IBV_CXX_REQ_LEN);
	/* the C++ struct: u32 node, u16 port, char[16] host, 2 bytes padding */
	memset(g, 0, sizeof(g));
	g[0] = 9;
	g[4] = 0x34, g[5] = 0x12;
	memcpy(g + 6, "10.0.0.5", 8);
	assert_memory_equal(b, g, sizeof(g));
	memset(b + IBV_CXX_REQ_LEN, 0, sizeof(b) - IBV_CXX_REQ_LEN); /* rdmacm pads */
	assert_int_equal(ibv_cxx_conn_decode(b, sizeof(b), &o, &why), 0);
	assert_int_equal(o.node, 9);
	assert_int_equal(o.port, 0x1234);
	assert_string_equal(o.host, "10.0.0.5");
	/* not ours, and ours is not C++'s */
	assert_int_equal(ibv_conn_req_decode(b, sizeof(b), &ro, &why), -EPROTO);
	memset(b, 0, sizeof(b));
	ibv_conn_req_encode(b, &r);
	assert_int_equal(ibv_cxx_conn_decode(b, sizeof(b), &o, &why), -EPROTO);
	ibv_conn_acc_encode(b, &(struct ibv_conn_acc){.nqp = 1, .rx_depth = 4, .rx_buf = 64});
	assert_int_equal(ibv_cxx_conn_decode(b, sizeof(b), &o, &why), -EPROTO);
	/* a node that has no id yet (C++'s Node::kEmpty, 32767), a 15-byte host */
	c.node = 32767;
	strcpy(c.host, "abcdefghijklmno");
	ibv_cxx_conn_encode(b, &c);
	assert_int_equal(ibv_cxx_conn_decode(b, IBV_CXX_REQ_LEN, &o, &why), 0);
	assert_string_equal(o.host, "abcdefghijklmno");
	/* malformed: short, node 0 or negative, host empty, unterminated, binary */
	assert_int_equal(ibv_cxx_conn_decode(b, IBV_CXX_REQ_LEN - 1, &o, &why), -EPROTO);
	assert_int_equal(ibv_cxx_conn_decode(NULL, 0, &o, &why), -EPROTO);
	memcpy(g, b, IBV_CXX_REQ_LEN);
	memset(g, 0, 4);
	assert_int_equal(ibv_cxx_conn_decode(g, IBV_CXX_REQ_LEN, &o, &why), -EPROTO);
	memset(g, 0xff, 4);
	assert_int_equal(ibv_cxx_conn_decode(g, IBV_CXX_REQ_LEN, &o, &why), -EPROTO);
	memcpy(g, b, IBV_CXX_REQ_LEN);
	g[6] = 0;
	assert_int_equal(ibv_cxx_conn_decode(g, IBV_CXX_REQ_LEN, &o, &why), -EPROTO);
	memcpy(g, b, IBV_CXX_REQ_LEN);
	g[21] = 'p';
	assert_int_equal(ibv_cxx_conn_decode(g, IBV_CXX_REQ_LEN, &o, &why), -EPROTO);
	memcpy(g, b, IBV_CXX_REQ_LEN);
	g[8] = 0x01;
	assert_int_equal(ibv_cxx_conn_decode(g, IBV_CXX_REQ_LEN, &o, &why), -EPROTO);
}

/* The rendezvous start and reply: layout, round trip, bad fields. */
static void test_cxx_rendezvous(void **state)
{
	struct ibv_cxx_start s = {.meta_len = 200, .nseg = 3, .len = {8, 1 << 20, 4},
				  .cookie = 0x1122334455667788ull}, so;
	struct ibv_cxx_reply r = {.addr = 0x7f0000001000ull, .cookie = 0x1122334455667788ull,
				  .rkey = 0xabcd, .idx = 17}, ro;
	uint8_t b[IBV_CXX_START_LEN];
	const char *why = "";
	(void)state;

	assert_int_equal(ibv_cxx_start_encode(b, &s), IBV_CXX_START_LEN);
	/* u64 meta_len, u64 nseg, u64 len[4] (unused ones 0), u64 cookie */
	assert_int_equal(b[0], 200);
	assert_int_equal(b[8], 3);
	assert_int_equal(b[16], 8);
	assert_int_equal(b[24 + 2], 0x10);
	assert_int_equal(b[32], 4);
	assert_int_equal(b[40], 0);
	assert_int_equal(b[48], 0x88);
	assert_int_equal(b[55], 0x11);
	assert_int_equal(ibv_cxx_start_decode(b, sizeof(b), &so, &why), 0);
	assert_memory_equal(&so, &s, sizeof(s));
	assert_true(ibv_cxx_buf_len(&so) == 4096 + 8 + (1 << 20) + 4);
	assert_int_equal(ibv_cxx_start_decode(b, sizeof(b) - 1, &so, &why), -EPROTO);
	s.nseg = 5;
	ibv_cxx_start_encode(b, &s);
	assert_int_equal(ibv_cxx_start_decode(b, sizeof(b), &so, &why), -EPROTO);
	s.nseg = 0, s.meta_len = 0;
	ibv_cxx_start_encode(b, &s);
	assert_int_equal(ibv_cxx_start_decode(b, sizeof(b), &so, &why), -EPROTO);
	s.meta_len = IBV_CXX_MAX_META + 1;
	ibv_cxx_start_encode(b, &s);
	assert_int_equal(ibv_cxx_start_decode(b, sizeof(b), &so, &why), -EPROTO);
	s.meta_len = 100, s.nseg = 2, s.len[0] = UINT64_MAX - 10, s.len[1] = 100;
	ibv_cxx_start_encode(b, &s);
	assert_int_equal(ibv_cxx_start_decode(b, sizeof(b), &so, &why), -EPROTO);
	/* a control message: the meta alone */
	s.nseg = 0, s.meta_len = 1;
	ibv_cxx_start_encode(b, &s);
	assert_int_equal(ibv_cxx_start_decode(b, sizeof(b), &so, &why), 0);
	assert_true(ibv_cxx_buf_len(&so) == 4096);

	assert_int_equal(ibv_cxx_reply_encode(b, &r), IBV_CXX_REPLY_LEN);
	/* u64 addr, u64 cookie, u32 rkey, u32 idx */
	assert_int_equal(b[1], 0x10);
	assert_int_equal(b[8], 0x88);
	assert_int_equal(b[16], 0xcd);
	assert_int_equal(b[20], 17);
	assert_int_equal(ibv_cxx_reply_decode(b, IBV_CXX_REPLY_LEN, 0, &ro, &why), 0);
	assert_memory_equal(&ro, &r, sizeof(r));
	assert_int_equal(ibv_cxx_reply_decode(b, IBV_CXX_REPLY_LEN - 1, 0, &ro, &why), -EPROTO);
	assert_int_equal(ibv_cxx_reply_decode(b, IBV_CXX_REPLY_LEN, 17, &ro, &why), -EPROTO);
	r.idx = IBV_CXX_POOL_DEFAULT;
	ibv_cxx_reply_encode(b, &r);
	assert_int_equal(ibv_cxx_reply_decode(b, IBV_CXX_REPLY_LEN, 0, &ro, &why), -EPROTO);
	r.idx = 0, r.addr = 0;
	ibv_cxx_reply_encode(b, &r);
	assert_int_equal(ibv_cxx_reply_decode(b, IBV_CXX_REPLY_LEN, 0, &ro, &why), -EPROTO);

	assert_true(ibv_cxx_data_offset(1) == 4096);
	assert_true(ibv_cxx_data_offset(4096) == 4096);
	assert_true(ibv_cxx_data_offset(4097) == 8192);
}

/* Random bytes: the C++ decoders never read past the record and what they
 * accept is in range. */
static void test_cxx_random(void **state)
{
	uint8_t b[IBV_CXX_START_LEN];
	struct ibv_cxx_conn c;
	struct ibv_cxx_start s;
	struct ibv_cxx_reply r;
	const char *why;
	unsigned seed = 12;
	int i, j;
	(void)state;

	for (i = 0; i < 20000; i++) {
		size_t len = (size_t)(rand_r(&seed) % (sizeof(b) + 1));
		for (j = 0; j < (int)sizeof(b); j++)
			b[j] = (uint8_t)(rand_r(&seed) >> (i % 3 ? 24 : 4));
		why = NULL;
		if (!ibv_cxx_conn_decode(b, len, &c, &why))
			assert_true(c.node >= 1 && strlen(c.host) >= 1 &&
				    strlen(c.host) < IBV_CXX_HOST_LEN);
		else
			assert_non_null(why);
		if (!ibv_cxx_start_decode(b, len, &s, &(const char *){""}))
			assert_true(s.nseg <= IBV_CXX_MAX_SEGS && ibv_cxx_buf_len(&s) > 0);
		if (!ibv_cxx_reply_decode(b, len, 64, &r, &(const char *){""}))
			assert_true(r.idx < 64 && r.addr);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conn_roundtrip),
		cmocka_unit_test(test_conn_proof),
		cmocka_unit_test(test_conn_malformed),
		cmocka_unit_test(test_msg_roundtrip),
		cmocka_unit_test(test_msg_malformed),
		cmocka_unit_test(test_cxx_conn),
		cmocka_unit_test(test_cxx_rendezvous),
		cmocka_unit_test(test_cxx_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
