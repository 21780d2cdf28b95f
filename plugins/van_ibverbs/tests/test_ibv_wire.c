/* Unit tests of van_ibverbs's wire records (ibv_wire.c), incl. malformed ones. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pslite/van_util.h>

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

/* A meta too large for a receive buffer travels by rendezvous: the record
 * carries its descriptor instead of its bytes. */
static void test_msg_meta_rdv(void **state)
{
	uint8_t buf[512], c[512], small[4] = {9, 8, 7, 6};
	struct ibv_wseg s[2] = {
		{.len = 4, .data = small},
		{.len = 1 << 20, .addr = 0x2000, .rkey = 3, .remote = true},
	};
	struct ibv_msg_hdr h = {.nseg = 2, .seq = 3, .meta_len = 200000, .token = 4,
				.meta_remote = true, .meta_addr = 0x7f0000008000ull,
				.meta_rkey = 0xabcd};
	struct ibv_msg_hdr o;
	struct ibv_wseg d[IBV_MAX_SEGS];
	const void *m = buf;
	const char *why = "";
	size_t n;
	(void)state;

	n = ibv_msg_rec_size(&h, s);
	assert_int_equal(n, IBV_MSG_HDR_LEN + 3 * IBV_SEG_DESC_LEN + 4);
	assert_int_equal(ibv_msg_encode(buf, sizeof(buf), &h, NULL, s), n);
	assert_int_equal(buf[1], IBV_MSG_F_META_RDV);
	assert_int_equal(ibv_msg_decode(buf, n, &o, d, &m, &why), 0);
	assert_true(o.meta_remote);
	assert_null(m);
	assert_int_equal(o.meta_len, 200000);
	assert_true(o.meta_addr == 0x7f0000008000ull);
	assert_int_equal(o.meta_rkey, 0xabcd);
	assert_memory_equal(d[0].data, small, 4);
	assert_true(d[1].remote);
	assert_true(d[1].addr == 0x2000);
	/* the meta's descriptor must match meta_len, be remote, have an address */
	memcpy(c, buf, n);
	c[IBV_MSG_HDR_LEN + 2 * IBV_SEG_DESC_LEN] ^= 1;
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	memcpy(c, buf, n);
	c[IBV_MSG_HDR_LEN + 2 * IBV_SEG_DESC_LEN + 20] = 0;
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	memcpy(c, buf, n);
	memset(c + IBV_MSG_HDR_LEN + 2 * IBV_SEG_DESC_LEN + 8, 0, 8);
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	/* a rendezvous meta needs a token, and unknown record flags fail */
	memcpy(c, buf, n);
	memset(c + 24, 0, 8);
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	memcpy(c, buf, n);
	c[1] = 2;
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	/* over the cap a receiver takes */
	memcpy(c, buf, n);
	psl_van_put_le32(c + 16, IBV_MAX_META_RDV + 1);
	psl_van_put_le64(c + IBV_MSG_HDR_LEN + 2 * IBV_SEG_DESC_LEN, IBV_MAX_META_RDV + 1ull);
	assert_int_equal(ibv_msg_decode(c, n, &o, d, &m, &why), -EPROTO);
	/* every truncation fails */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(ibv_msg_decode(buf, i, &o, d, &m, &why), -EPROTO);
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


/* A ps-lite meta (docs/wire.md §4.2) with the fields the C++ mode reads. */
static size_t mk_meta(uint8_t *m, int cmd, int req, int push, int sapp, int ntypes,
		      const int32_t *types, uint64_t addr, int32_t val_len)
{
	int i;
	memset(m, 0, 112 + 4 * 16);
	psl_van_put_le32(m, 7);		  /* head */
	psl_van_put_le32(m + 8, (uint32_t)cmd);
	m[32] = (uint8_t)req;
	psl_van_put_le32(m + 40, 5);	  /* timestamp */
	psl_van_put_le32(m + 44, (uint32_t)ntypes);
	m[68] = (uint8_t)push;
	m[69] = (uint8_t)sapp;
	psl_van_put_le64(m + 88, addr);
	psl_van_put_le32(m + 96, (uint32_t)val_len);
	for (i = 0; i < ntypes; i++)
		psl_van_put_le32(m + 112 + 4 * i, (uint32_t)types[i]);
	return 112 + 4 * (size_t)ntypes;
}

/* What goes to a C++ node: one key into the meta's key field, values counted
 * in bytes, 3 segments announced for a push, the refusals. */
static void test_cxx_plan(void **state)
{
	static const int32_t bytes3[] = {8, 11, 3}, bytes2[] = {8, 11}, f32[] = {8, 9, 3};
	uint8_t m[112 + 64], keys[16];
	uint64_t lens[4];
	struct ibv_cxx_plan p;
	struct ibv_cxx_meta mm;
	const char *why;
	size_t n;
	(void)state;

	psl_van_put_le64(keys, 0x0102030405060708ull);
	psl_van_put_le64(keys + 8, 9);
	/* push request, 1 key, 5000 bytes with lens */
	n = mk_meta(m, 0, 1, 1, 0, 3, bytes3, 0x1000, 5000);
	lens[0] = 8, lens[1] = 5000, lens[2] = 4;
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 3, &p, &why), 0);
	assert_int_equal(p.kind, IBV_CXX_PUSH_REQ);
	assert_true(p.key == 0x0102030405060708ull);
	assert_true(psl_van_get_le64(m + 80) == 0x0102030405060708ull);
	assert_int_equal((int32_t)psl_van_get_le32(m + 96), 5000);
	assert_true(p.start.nseg == 3 && p.start.len[0] == 8 && p.start.len[1] == 5000 &&
		    p.start.len[2] == 4 && p.start.meta_len == n);
	assert_int_equal(p.data_seg, 1);
	assert_true(p.need == 4096 + 8 + 5000 + 4);
	/* without lens: still 3 announced, val_len from the values */
	n = mk_meta(m, 0, 1, 1, 0, 2, bytes2, 0x1000, 77);
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 2, &p, &why), 0);
	assert_true(p.start.nseg == 3 && p.start.len[2] == 4);
	assert_int_equal((int32_t)psl_van_get_le32(m + 96), 5000);
	/* empty values: nothing to write before the meta */
	lens[1] = 0;
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 2, &p, &why), 0);
	assert_int_equal(p.data_seg, -1);
	lens[1] = 5000;
	/* two keys, float values, odd lens: refused with a reason */
	lens[0] = 16;
	why = NULL;
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 2, &p, &why), -EPROTO);
	assert_non_null(strstr(why, "one key"));
	lens[0] = 8;
	n = mk_meta(m, 0, 1, 1, 0, 3, f32, 0x1000, 1250);
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 3, &p, &why), -EPROTO);
	assert_non_null(strstr(why, "bytes"));
	n = mk_meta(m, 0, 1, 1, 0, 3, bytes3, 0x1000, 5000);
	lens[2] = 8;
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 3, &p, &why), -EPROTO);
	lens[2] = 4;
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 1, &p, &why), -EPROTO);
	/* pull request: room for the answer in val_len, key patched */
	n = mk_meta(m, 0, 1, 0, 0, 2, bytes2, 0x7f00aa, 4096);
	lens[0] = 8, lens[1] = 0;
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 2, &p, &why), 0);
	assert_int_equal(p.kind, IBV_CXX_PULL_REQ);
	assert_true(p.pull_addr == 0x7f00aa && p.pull_len == 4096);
	assert_true(psl_van_get_le64(m + 80) == 0x0102030405060708ull);
	assert_true(p.start.nseg == 2 && p.data_seg == -1);
	ibv_cxx_meta_set_option(m, 0x4321);
	assert_int_equal(ibv_cxx_meta_peek(m, n, &mm, &why), 0);
	assert_int_equal(mm.option, 0x4321);
	n = mk_meta(m, 0, 1, 0, 0, 2, bytes2, 0x7f00aa, 0);
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 2, &p, &why), -EPROTO);
	n = mk_meta(m, 0, 1, 0, 0, 2, bytes2, 0, 64);
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 2, &p, &why), -EPROTO);
	/* pull answer: val_len becomes the values' bytes, written to addr */
	n = mk_meta(m, 0, 0, 0, 0, 3, bytes3, 0x7f00aa, 4096);
	psl_van_put_le64(m + 80, 42);
	lens[0] = 8, lens[1] = 1000, lens[2] = 4;
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 3, &p, &why), 0);
	assert_int_equal(p.kind, IBV_CXX_PULL_RESP);
	assert_true(p.key == 42 && p.data_seg == 1);
	assert_int_equal((int32_t)psl_van_get_le32(m + 96), 1000);
	psl_van_put_le64(m + 88, 0);
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 3, &p, &why), -EPROTO);
	/* an error answer (no data) and a push answer: the meta alone */
	n = mk_meta(m, 0, 0, 0, 0, 0, NULL, 0x7f00aa, 4096);
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 0, &p, &why), 0);
	assert_true(p.data_seg == -1 && p.start.nseg == 0);
	n = mk_meta(m, 0, 0, 1, 0, 0, NULL, 0, 0);
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 0, &p, &why), 0);
	assert_int_equal(p.kind, IBV_CXX_PUSH_RESP);
	/* control and SimpleApp: the meta alone, whatever the segments */
	n = mk_meta(m, 3, 1, 0, 0, 0, NULL, 0, 0);
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 3, &p, &why), 0);
	assert_true(p.kind == IBV_CXX_OTHER && p.start.nseg == 0 && p.need == n &&
		    p.data_seg == -1);
	n = mk_meta(m, 0, 1, 0, 1, 0, NULL, 0, 0);
	lens[0] = 16;
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 1, &p, &why), 0);
	assert_int_equal(p.kind, IBV_CXX_OTHER);
	/* not a meta */
	assert_int_equal(ibv_cxx_plan(m, 111, lens, keys, 0, &p, &why), -EPROTO);
	n = mk_meta(m, 0, 2, 0, 0, 0, NULL, 0, 0);
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 0, &p, &why), -EPROTO);
	n = mk_meta(m, 0, 1, 0, 0, 3, bytes3, 0, 0);
	assert_int_equal(ibv_cxx_plan(m, n - 1, lens, keys, 0, &p, &why), -EPROTO);
}

/* What comes from a C++ node: the message rebuilt from the meta, bounded by
 * the buffer its START announced; and what we plan, C++ reads back. */
static void test_cxx_unpack(void **state)
{
	static const int32_t bytes3[] = {8, 11, 3}, bytes2[] = {8, 11};
	uint8_t m[112 + 64], keys[8];
	uint64_t lens[3] = {8, 3000, 4};
	struct ibv_cxx_plan p;
	struct ibv_cxx_in in;
	const char *why;
	size_t n;
	(void)state;

	psl_van_put_le64(keys, 77);
	n = mk_meta(m, 0, 1, 1, 0, 3, bytes3, 0x1000, 3000);
	assert_int_equal(ibv_cxx_plan(m, n, lens, keys, 3, &p, &why), 0);
	assert_int_equal(ibv_cxx_unpack(m, n, p.need, &in, &why), 0);
	assert_true(in.kind == IBV_CXX_PUSH_REQ && in.nseg == 3 && in.key == 77 &&
		    in.val_len == 3000 && in.vals_off == 4096);
	/* values past the announced buffer */
	assert_int_equal(ibv_cxx_unpack(m, n, 4096 + 3000, &in, &why), 0);
	assert_int_equal(ibv_cxx_unpack(m, n, 4096 + 3000 - 1, &in, &why), -EPROTO);
	ibv_cxx_meta_set_val_len(m, -1);
	assert_int_equal(ibv_cxx_unpack(m, n, p.need, &in, &why), -EPROTO);
	/* pull request: keys and no values */
	n = mk_meta(m, 0, 1, 0, 0, 2, bytes2, 0x2000, 64);
	ibv_cxx_meta_set_key(m, 5);
	assert_int_equal(ibv_cxx_unpack(m, n, n, &in, &why), 0);
	assert_true(in.kind == IBV_CXX_PULL_REQ && in.nseg == 2 && in.key == 5);
	/* pull answer: values at addr */
	n = mk_meta(m, 0, 0, 0, 0, 3, bytes3, 0x2000, 64);
	assert_int_equal(ibv_cxx_unpack(m, n, n, &in, &why), 0);
	assert_true(in.kind == IBV_CXX_PULL_RESP && in.vals_addr == 0x2000 && in.nseg == 3 &&
		    in.val_len == 64);
	n = mk_meta(m, 0, 0, 0, 0, 3, bytes3, 0, 64);
	assert_int_equal(ibv_cxx_unpack(m, n, n, &in, &why), -EPROTO);
	/* push answer and control: the meta alone */
	n = mk_meta(m, 0, 0, 1, 0, 0, NULL, 0, 0);
	assert_int_equal(ibv_cxx_unpack(m, n, n, &in, &why), 0);
	assert_true(in.kind == IBV_CXX_PUSH_RESP && in.nseg == 0);
	n = mk_meta(m, 2, 1, 0, 0, 0, NULL, 0, 0);
	assert_int_equal(ibv_cxx_unpack(m, n, n, &in, &why), 0);
	assert_true(in.kind == IBV_CXX_OTHER && in.nseg == 0);
}

/* Random metas: peek and unpack never read past them, and what unpack takes
 * stays inside its buffer. */
static void test_cxx_meta_random(void **state)
{
	uint8_t b[112 + 128];
	struct ibv_cxx_in in;
	struct ibv_cxx_meta mm;
	unsigned seed = 33;
	int i, j;
	(void)state;

	for (i = 0; i < 20000; i++) {
		size_t len = 100 + (size_t)(rand_r(&seed) % (sizeof(b) - 99));
		uint64_t cap = (uint64_t)(rand_r(&seed) % 20000);
		for (j = 0; j < (int)sizeof(b); j++)
			b[j] = (uint8_t)(rand_r(&seed) >> 24);
		if (i % 2) { /* mostly valid flags and counts */
			b[32] &= 1, b[68] &= 1, b[69] &= 1;
			psl_van_put_le32(b + 4, (uint32_t)(rand_r(&seed) % 8));
			psl_van_put_le32(b + 44, (uint32_t)(rand_r(&seed) % 5));
			if (i % 4 == 1)
				psl_van_put_le32(b + 8, 0);
			psl_van_put_le32(b + 96, (uint32_t)(rand_r(&seed) % 30000));
		}
		if (!ibv_cxx_meta_peek(b, len, &mm, &(const char *){""}))
			assert_true(mm.kind >= IBV_CXX_OTHER && mm.kind <= IBV_CXX_PULL_RESP);
		if (!ibv_cxx_unpack(b, len, cap, &in, &(const char *){""})) {
			assert_true(in.nseg == 0 || in.nseg == 2 || in.nseg == 3);
			if (in.kind == IBV_CXX_PUSH_REQ)
				assert_true(in.vals_off + (uint64_t)in.val_len <= cap);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conn_roundtrip),
		cmocka_unit_test(test_conn_proof),
		cmocka_unit_test(test_conn_malformed),
		cmocka_unit_test(test_msg_roundtrip),
		cmocka_unit_test(test_msg_meta_rdv),
		cmocka_unit_test(test_msg_malformed),
		cmocka_unit_test(test_cxx_conn),
		cmocka_unit_test(test_cxx_rendezvous),
		cmocka_unit_test(test_cxx_random),
		cmocka_unit_test(test_cxx_plan),
		cmocka_unit_test(test_cxx_unpack),
		cmocka_unit_test(test_cxx_meta_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
