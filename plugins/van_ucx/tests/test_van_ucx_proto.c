/*
 * Unit tests of van_ucx's wire formats and decisions (plugins/van_ucx/
 * ucx_proto.c): what a peer's first bytes say about its van, the bootstrap
 * records, the active message header, the head part's layout, which memory
 * can be sent with the UCX found at run time, and the summary of UCX's
 * resources. None of it needs UCX, a GPU or an RDMA device.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <pslite/van.h>

#include "ucx_proto.h"

/* ------------------------------------------------------------ greeting -- */

static int classify_str(const char *s, size_t len, size_t *used, char *other)
{
	return psl__ucxp_classify((const uint8_t *)s, len, used, other, 40);
}

static void test_greeting_ours(void **state)
{
	char buf[32], other[40];
	size_t n = psl__ucxp_greeting(buf, sizeof(buf)), used;
	(void)state;
	assert_int_equal(n, strlen("PSLVAN1 ucx\n"));
	assert_memory_equal(buf, "PSLVAN1 ucx\n", n);
	assert_int_equal(classify_str(buf, n, &used, other), UCXP_PEER_UCX);
	assert_int_equal(used, n);
	/* what follows the greeting is not part of it */
	assert_int_equal(classify_str("PSLVAN1 ucx\nUCXh", 16, &used, other), UCXP_PEER_UCX);
	assert_int_equal(used, 12);
}

static void test_greeting_partial(void **state)
{
	char other[40];
	size_t used = 99;
	(void)state;
	assert_int_equal(classify_str("", 0, &used, other), UCXP_PEER_NEED_MORE);
	assert_int_equal(used, 0);
	assert_int_equal(classify_str("PSL", 3, &used, other), UCXP_PEER_NEED_MORE);
	assert_int_equal(classify_str("PSLVAN1 uc", 10, &used, other), UCXP_PEER_NEED_MORE);
	assert_int_equal(classify_str("\xff\0\0\0\0", 5, &used, other), UCXP_PEER_NEED_MORE);
}

static void test_greeting_other_van(void **state)
{
	char other[40];
	size_t used;
	(void)state;
	assert_int_equal(classify_str("PSLVAN1 fabric\n", 15, &used, other),
			 UCXP_PEER_OTHER_VAN);
	assert_string_equal(other, "fabric");
	assert_int_equal(used, 15);
	/* a name that only starts like ours is another van */
	assert_int_equal(classify_str("PSLVAN1 ucx2\n", 13, &used, other), UCXP_PEER_OTHER_VAN);
	assert_string_equal(other, "ucx2");
}

static void test_greeting_zmtp(void **state)
{
	/* ZMTP 3: 0xFF, 8 bytes, 0x7F, then the version */
	static const uint8_t zmtp[] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0};
	char other[40], what[96];
	size_t used;
	(void)state;
	assert_int_equal(psl__ucxp_classify(zmtp, sizeof(zmtp), &used, other, sizeof(other)),
			 UCXP_PEER_ZMTP);
	assert_int_equal(psl__ucxp_classify(zmtp, 10, &used, other, sizeof(other)),
			 UCXP_PEER_ZMTP);
	psl__ucxp_peer_desc(UCXP_PEER_ZMTP, NULL, what, sizeof(what));
	assert_non_null(strstr(what, "van zmq"));
	psl__ucxp_peer_desc(UCXP_PEER_OTHER_VAN, "fabric", what, sizeof(what));
	assert_string_equal(what, "van fabric");
}

static void test_greeting_garbage(void **state)
{
	static const uint8_t ff_not_zmtp[] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x00};
	char other[40], name[8 + 64];
	size_t used;
	(void)state;
	assert_int_equal(classify_str("HTTP/1.1 400", 12, &used, other), UCXP_PEER_UNKNOWN);
	assert_int_equal(psl__ucxp_classify(ff_not_zmtp, sizeof(ff_not_zmtp), &used, other,
					    sizeof(other)),
			 UCXP_PEER_UNKNOWN);
	assert_int_equal(classify_str("PSLVAN1 \n", 9, &used, other), UCXP_PEER_UNKNOWN);
	assert_int_equal(classify_str("PSLVAN1 a b\n", 12, &used, other), UCXP_PEER_UNKNOWN);
	/* a name that never ends is not waited for for ever (64 characters:
	 * one more than PSL_VAN_NAME_LEN_MAX) */
	memset(name, 'x', sizeof(name));
	memcpy(name, "PSLVAN1 ", 8);
	assert_int_equal(classify_str(name, sizeof(name), &used, other), UCXP_PEER_UNKNOWN);
}

/* ------------------------------------------------------ hello, welcome -- */

static void test_hello_roundtrip(void **state)
{
	struct ucxp_hello h = {.version = UCXP_PROTO_VERSION,
			       .flags = 0,
			       .node_id = 9,
			       .ucx_version = 0x010d0000},
			  g;
	uint8_t buf[UCXP_HELLO_SIZE];
	(void)state;
	psl__ucxp_hello_encode(&h, buf);
	assert_int_equal(psl__ucxp_hello_decode(buf, sizeof(buf), &g), 0);
	assert_int_equal(g.node_id, 9);
	assert_int_equal(g.ucx_version, 0x010d0000);
	/* not there yet */
	assert_int_equal(psl__ucxp_hello_decode(buf, 3, &g), -EAGAIN);
	assert_int_equal(psl__ucxp_hello_decode(buf, UCXP_HELLO_SIZE - 1, &g), -EAGAIN);
	/* an unregistered node */
	h.node_id = PSL_VAN_ID_NONE;
	psl__ucxp_hello_encode(&h, buf);
	assert_int_equal(psl__ucxp_hello_decode(buf, sizeof(buf), &g), 0);
	assert_int_equal(g.node_id, PSL_VAN_ID_NONE);
}

static void test_hello_bad(void **state)
{
	struct ucxp_hello h = {.version = UCXP_PROTO_VERSION, .node_id = 9}, g;
	uint8_t buf[UCXP_HELLO_SIZE];
	(void)state;
	psl__ucxp_hello_encode(&h, buf);
	buf[0] ^= 1; /* magic */
	assert_int_equal(psl__ucxp_hello_decode(buf, sizeof(buf), &g), -EPROTO);
	h.version = UCXP_PROTO_VERSION + 1;
	psl__ucxp_hello_encode(&h, buf);
	assert_int_equal(psl__ucxp_hello_decode(buf, sizeof(buf), &g), -EPROTO);
	h.version = UCXP_PROTO_VERSION;
	h.node_id = -5;
	psl__ucxp_hello_encode(&h, buf);
	assert_int_equal(psl__ucxp_hello_decode(buf, sizeof(buf), &g), -EPROTO);
	h.node_id = 70000;
	psl__ucxp_hello_encode(&h, buf);
	assert_int_equal(psl__ucxp_hello_decode(buf, sizeof(buf), &g), -EPROTO);
}

static void test_welcome(void **state)
{
	struct ucxp_welcome w = {.version = UCXP_PROTO_VERSION,
				 .conn = 3,
				 .nonce = 0xdeadbeef,
				 .ucx_version = 1,
				 .addr_len = 5},
			    g;
	uint8_t buf[UCXP_WELCOME_SIZE + 5];
	(void)state;
	psl__ucxp_welcome_encode(&w, buf);
	memcpy(buf + UCXP_WELCOME_SIZE, "abcde", 5);
	assert_int_equal(psl__ucxp_welcome_decode(buf, sizeof(buf), &g), 0);
	assert_int_equal(g.conn, 3);
	assert_int_equal(g.nonce, 0xdeadbeef);
	assert_int_equal(g.addr_len, 5);
	/* the address must be there too */
	assert_int_equal(psl__ucxp_welcome_decode(buf, sizeof(buf) - 1, &g), -EAGAIN);
	assert_int_equal(psl__ucxp_welcome_decode(buf, 10, &g), -EAGAIN);
	/* an empty or huge address is refused, not waited for */
	w.addr_len = 0;
	psl__ucxp_welcome_encode(&w, buf);
	assert_int_equal(psl__ucxp_welcome_decode(buf, sizeof(buf), &g), -EPROTO);
	w.addr_len = UCXP_MAX_ADDR + 1;
	psl__ucxp_welcome_encode(&w, buf);
	assert_int_equal(psl__ucxp_welcome_decode(buf, sizeof(buf), &g), -EPROTO);
	/* a refusal (job secret) carries its status and no address */
	w.addr_len = 0;
	w.status = UCXP_WELCOME_BAD_PROOF;
	psl__ucxp_welcome_encode(&w, buf);
	assert_int_equal(psl__ucxp_welcome_decode(buf, UCXP_WELCOME_SIZE, &g), 0);
	assert_int_equal(g.status, UCXP_WELCOME_BAD_PROOF);
	assert_int_equal(g.addr_len, 0);
	w.status = 0;
	/* a hello is not a welcome */
	{
		struct ucxp_hello h = {.version = UCXP_PROTO_VERSION, .node_id = 1};
		uint8_t hb[UCXP_WELCOME_SIZE] = {0};
		psl__ucxp_hello_encode(&h, hb);
		assert_int_equal(psl__ucxp_welcome_decode(hb, sizeof(hb), &g), -EPROTO);
	}
}

/* ----------------------------------------------- active message header -- */

static void test_am_hdr(void **state)
{
	struct ucxp_am_hdr h = {.conn = 7,
				.nonce = 0x12345679,
				.seq = 0x100000002ull,
				.part = 2,
				.nparts = 3,
				.nseg = 3,
				.seg = 2},
			   g;
	uint8_t buf[UCXP_AM_HDR_SIZE];
	(void)state;
	psl__ucxp_am_hdr_encode(&h, buf);
	assert_int_equal(psl__ucxp_am_hdr_decode(buf, sizeof(buf), &g), 0);
	assert_int_equal(g.conn, 7);
	assert_int_equal(g.nonce, 0x12345679);
	assert_true(g.seq == 0x100000002ull);
	assert_int_equal(g.part, 2);
	assert_int_equal(g.nparts, 3);
	assert_int_equal(g.nseg, 3);
	assert_int_equal(g.seg, 2);
	assert_int_equal(psl__ucxp_am_hdr_decode(buf, sizeof(buf) - 1, &g), -EPROTO);
	assert_int_equal(psl__ucxp_am_hdr_decode(NULL, 0, &g), -EPROTO);
}

static void test_am_hdr_inconsistent(void **state)
{
	struct ucxp_am_hdr h = {.nparts = 1, .nseg = 0}, g;
	uint8_t buf[UCXP_AM_HDR_SIZE];
	(void)state;
	psl__ucxp_am_hdr_encode(&h, buf);
	assert_int_equal(psl__ucxp_am_hdr_decode(buf, sizeof(buf), &g), 0);
	h.nparts = 2; /* more parts than segments + 1 */
	psl__ucxp_am_hdr_encode(&h, buf);
	assert_int_equal(psl__ucxp_am_hdr_decode(buf, sizeof(buf), &g), -EPROTO);
	h.nseg = 2;
	h.part = 2; /* part beyond nparts */
	psl__ucxp_am_hdr_encode(&h, buf);
	assert_int_equal(psl__ucxp_am_hdr_decode(buf, sizeof(buf), &g), -EPROTO);
	h.part = 1;
	h.seg = 2; /* segment beyond nseg */
	psl__ucxp_am_hdr_encode(&h, buf);
	assert_int_equal(psl__ucxp_am_hdr_decode(buf, sizeof(buf), &g), -EPROTO);
	h.nseg = UCXP_MAX_SEG + 1;
	h.seg = 0;
	psl__ucxp_am_hdr_encode(&h, buf);
	assert_int_equal(psl__ucxp_am_hdr_decode(buf, sizeof(buf), &g), -EPROTO);
	h.nparts = 0;
	h.nseg = 0;
	h.part = 0;
	psl__ucxp_am_hdr_encode(&h, buf);
	assert_int_equal(psl__ucxp_am_hdr_decode(buf, sizeof(buf), &g), -EPROTO);
}

/* ----------------------------------------------------- the head part -- */

/* meta "hello", segment 0 inline (3 bytes), 1 separate (1 MiB), 2 inline (0) */
static size_t build_head(uint8_t *buf, size_t cap, struct ucxp_seg_desc *d)
{
	size_t n, off;
	d[0] = (struct ucxp_seg_desc){3, UCXP_SEG_INLINE};
	d[1] = (struct ucxp_seg_desc){1 << 20, 0};
	d[2] = (struct ucxp_seg_desc){0, UCXP_SEG_INLINE};
	n = psl__ucxp_head_size(5, d, 3);
	assert_true(n <= cap);
	off = psl__ucxp_head_write(buf, "hello", 5, d, 3);
	assert_int_equal(off % 8, 0);
	memcpy(buf + off, "abc", 3);
	memset(buf + off + 3, 0, 5);
	return n;
}

static void test_head_roundtrip(void **state)
{
	uint8_t buf[256];
	struct ucxp_seg_desc d[3], g[3];
	size_t inl[3], moff, mlen, n = build_head(buf, sizeof(buf), d);
	char why[160];
	(void)state;
	assert_int_equal(n, 8 + 3 * 16 + 8 + 8);
	assert_int_equal(psl__ucxp_head_parse(buf, n, 3, g, &moff, &mlen, inl, why, sizeof(why)),
			 0);
	assert_int_equal(mlen, 5);
	assert_memory_equal(buf + moff, "hello", 5);
	assert_int_equal(g[0].len, 3);
	assert_int_equal(g[0].flags, UCXP_SEG_INLINE);
	assert_memory_equal(buf + inl[0], "abc", 3);
	assert_int_equal(inl[0] % 8, 0);
	assert_true(g[1].len == (1u << 20));
	assert_int_equal(g[1].flags, 0);
	assert_int_equal(g[2].len, 0);
}

static void test_head_bad(void **state)
{
	uint8_t buf[256];
	struct ucxp_seg_desc d[3], g[3];
	size_t inl[3], moff, mlen, n = build_head(buf, sizeof(buf), d);
	char why[160];
	(void)state;
	/* segment count disagrees with the header */
	assert_int_equal(
		psl__ucxp_head_parse(buf, n, 2, g, &moff, &mlen, inl, why, sizeof(why)), -EPROTO);
	/* truncated, or with bytes to spare */
	assert_int_equal(
		psl__ucxp_head_parse(buf, n - 8, 3, g, &moff, &mlen, inl, why, sizeof(why)),
		-EPROTO);
	assert_int_equal(
		psl__ucxp_head_parse(buf, n + 8, 3, g, &moff, &mlen, inl, why, sizeof(why)),
		-EPROTO);
	assert_int_equal(psl__ucxp_head_parse(buf, 4, 3, g, &moff, &mlen, inl, why, sizeof(why)),
			 -EPROTO);
	/* an inline segment that claims more than there is */
	buf[8] = 200;
	assert_int_equal(
		psl__ucxp_head_parse(buf, n, 3, g, &moff, &mlen, inl, why, sizeof(why)), -EPROTO);
	assert_non_null(strstr(why, "overruns"));
	buf[8] = 3;
	/* unknown segment flags */
	buf[8 + 16 + 8] = 0x80;
	assert_int_equal(
		psl__ucxp_head_parse(buf, n, 3, g, &moff, &mlen, inl, why, sizeof(why)), -EPROTO);
	buf[8 + 16 + 8] = 0;
	/* a meta longer than the head */
	buf[0] = 0xff;
	assert_int_equal(
		psl__ucxp_head_parse(buf, n, 3, g, &moff, &mlen, inl, why, sizeof(why)), -EPROTO);
}

/* ---------------------------------------------------- memory, devices -- */

static void test_mem_caps(void **state)
{
	const uint64_t cuda = (1u << 1) | (1u << 2); /* UCS_MEMORY_TYPE_CUDA(_MANAGED) */
	(void)state;
	assert_int_equal(psl__ucxp_mem_caps(1u << 0, cuda), UCXP_MEM_HOST);
	assert_int_equal(psl__ucxp_mem_caps((1u << 0) | (1u << 1), cuda),
			 UCXP_MEM_HOST | UCXP_MEM_CUDA);
	assert_int_equal(psl__ucxp_mem_caps((1u << 0) | (1u << 3), cuda), UCXP_MEM_HOST);
	assert_int_equal(psl__ucxp_mem_caps(0, cuda), UCXP_MEM_HOST);
}

static void test_mem_check_host(void **state)
{
	char why[320] = "";
	(void)state;
	assert_int_equal(psl__ucxp_mem_check(PSL_MEM_HOST, -1, UCXP_MEM_HOST, why, sizeof(why)),
			 0);
	assert_int_equal(psl__ucxp_mem_check(PSL_MEM_HOST, 0, UCXP_MEM_HOST, why, sizeof(why)), 0);
}

static void test_mem_check_cuda_without_cuda(void **state)
{
	char why[320] = "";
	(void)state;
	/* the UCX found at run time has no CUDA: a clear error, not a crash */
	assert_int_equal(psl__ucxp_mem_check(PSL_MEM_CUDA, 0, UCXP_MEM_HOST, why, sizeof(why)),
			 -ENOTSUP);
	assert_non_null(strstr(why, "no CUDA support"));
	assert_non_null(strstr(why, "device 0"));
}

static void test_mem_check_cuda_with_cuda(void **state)
{
	char why[320] = "";
	(void)state;
	assert_int_equal(psl__ucxp_mem_check(PSL_MEM_CUDA, 3, UCXP_MEM_HOST | UCXP_MEM_CUDA, why,
					     sizeof(why)),
			 0);
	/* a CUDA segment must say which device */
	assert_int_equal(psl__ucxp_mem_check(PSL_MEM_CUDA, -1, UCXP_MEM_HOST | UCXP_MEM_CUDA, why,
					     sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "dev_id"));
}

static void test_mem_check_unknown(void **state)
{
	char why[320] = "";
	(void)state;
	assert_int_equal(psl__ucxp_mem_check(7, 0, UCXP_MEM_HOST | UCXP_MEM_CUDA, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "unknown memory type 7"));
	assert_int_equal(psl__ucxp_mem_check(-1, 0, UCXP_MEM_HOST, why, sizeof(why)), -EINVAL);
}

/* the text ucp_context_print_info writes with UCX 1.13.1 on this machine */
static const char info_here[] = "#\n"
				"# UCP context\n"
				"#\n"
				"#     component 0  :  self\n"
				"#     component 1  :  tcp\n"
				"#            md 0  :  component 0  self \n"
				"#            md 1  :  component 1  tcp \n"
				"#      resource 0  :  md 0  dev 0  flags -- self/memory0\n"
				"#      resource 1  :  md 1  dev 1  flags -- tcp/lo\n"
				"#      resource 2  :  md 1  dev 2  flags -- tcp/eth0\n"
				"#      resource 3  :  md 2  dev 3  flags -- sysv/memory\n"
				"#      resource 4  :  md 3  dev 3  flags -- posix/memory\n"
				"#      resource 5  :  md 4  dev 3  flags -- cma/memory\n"
				"#\n";

/* what a GPU node with ConnectX would list */
static const char info_gpu[] = "#      resource 0  :  md 0  dev 0  flags -- rc_mlx5/mlx5_0:1\n"
			       "#      resource 1  :  md 0  dev 0  flags -- dc_mlx5/mlx5_0:1\n"
			       "#      resource 2  :  md 1  dev 1  flags -- cuda_copy/cuda\n"
			       "#      resource 3  :  md 2  dev 2  flags -- cuda_ipc/cuda\n"
			       "#      resource 4  :  md 3  dev 3  flags -- gdr_copy/mlx5_0:1\n";

static void test_resources(void **state)
{
	char out[256];
	unsigned f;
	(void)state;
	f = psl__ucxp_resources(info_here, out, sizeof(out));
	assert_string_equal(out, "self/memory0 tcp/lo tcp/eth0 sysv/memory posix/memory "
				 "cma/memory");
	assert_int_equal(f, UCXP_TL_SHM | UCXP_TL_TCP);
	assert_false(f & UCXP_TL_RDMA);
	f = psl__ucxp_resources(info_gpu, out, sizeof(out));
	assert_int_equal(f, UCXP_TL_RDMA | UCXP_TL_CUDA);
	assert_non_null(strstr(out, "rc_mlx5/mlx5_0:1"));
	/* nothing recognisable: nothing claimed */
	f = psl__ucxp_resources("garbage\nresource without a dash\n", out, sizeof(out));
	assert_int_equal(f, 0);
	assert_string_equal(out, "");
	/* a small buffer is not overrun */
	f = psl__ucxp_resources(info_here, out, 16);
	assert_true(strlen(out) < 16);
	assert_int_equal(f, UCXP_TL_SHM | UCXP_TL_TCP);
}

static void test_tls_has_mm(void **state)
{
	(void)state;
	assert_true(psl__ucxp_tls_has_mm(NULL));
	assert_true(psl__ucxp_tls_has_mm(""));
	assert_true(psl__ucxp_tls_has_mm("^tcp"));
	assert_true(psl__ucxp_tls_has_mm("posix,sysv,cma,self"));
	assert_true(psl__ucxp_tls_has_mm("tcp,sm"));
	assert_true(psl__ucxp_tls_has_mm("rc,ud,shm,self"));
	assert_true(psl__ucxp_tls_has_mm("all"));
	assert_false(psl__ucxp_tls_has_mm("tcp"));
	assert_false(psl__ucxp_tls_has_mm("tcp,cma,self"));
	assert_false(psl__ucxp_tls_has_mm("rc_verbs,ud_verbs"));
	assert_false(psl__ucxp_tls_has_mm("posixx,smx"));
}

static void test_rndv_put(void **state)
{
	(void)state;
	/* UCX picks among what this machine has: put unless RDMA or a GPU */
	assert_true(psl__ucxp_rndv_put(NULL, false));
	assert_true(psl__ucxp_rndv_put("", false));
	assert_true(psl__ucxp_rndv_put("all", false));
	assert_true(psl__ucxp_rndv_put("^ud", false));
	assert_false(psl__ucxp_rndv_put(NULL, true));
	assert_false(psl__ucxp_rndv_put("all", true));
	assert_false(psl__ucxp_rndv_put("^ud", true));
	/* shared memory with cross-memory attach, with or without tcp */
	assert_true(psl__ucxp_rndv_put("posix,sysv,cma,self", false));
	assert_true(psl__ucxp_rndv_put("posix,sysv,cma,self", true));
	assert_true(psl__ucxp_rndv_put("sm,tcp,self", true));
	assert_true(psl__ucxp_rndv_put("shm", false));
	/* no cma: nothing to gain; RDMA or GPU transports named: UCX's choice */
	assert_false(psl__ucxp_rndv_put("tcp", false));
	assert_false(psl__ucxp_rndv_put("posix,sysv,self", false));
	assert_false(psl__ucxp_rndv_put("rc,sm,self", false));
	assert_false(psl__ucxp_rndv_put("cma,cuda_copy,cuda_ipc", false));
	assert_false(psl__ucxp_rndv_put("cmax,posix", false));
	assert_false(psl__ucxp_rndv_put("all,rc", true));
}

static void test_batch_roundtrip(void **state)
{
	uint8_t buf[256], h1[16], h2[40];
	const uint8_t *head;
	size_t off = 0, n = 0, hl;
	uint32_t nseg;
	(void)state;
	memset(h1, 0x11, sizeof(h1));
	memset(h2, 0x22, sizeof(h2));
	n += psl__ucxp_batch_put(buf + n, h1, sizeof(h1), 0);
	n += psl__ucxp_batch_put(buf + n, h2, sizeof(h2), UCXP_MAX_SEG);
	assert_int_equal(n, 2 * UCXP_BATCH_REC + sizeof(h1) + sizeof(h2));
	assert_int_equal(psl__ucxp_batch_next(buf, n, &off, &head, &hl, &nseg), 1);
	assert_int_equal(hl, sizeof(h1));
	assert_int_equal(nseg, 0);
	assert_memory_equal(head, h1, sizeof(h1));
	assert_int_equal(psl__ucxp_batch_next(buf, n, &off, &head, &hl, &nseg), 1);
	assert_int_equal(hl, sizeof(h2));
	assert_int_equal(nseg, UCXP_MAX_SEG);
	assert_memory_equal(head, h2, sizeof(h2));
	assert_int_equal(psl__ucxp_batch_next(buf, n, &off, &head, &hl, &nseg), 0);
	assert_int_equal(off, n);
}

static void test_batch_bad(void **state)
{
	uint8_t buf[64], h[16] = {0};
	const uint8_t *head;
	size_t off, n, hl;
	uint32_t nseg;
	(void)state;
	n = psl__ucxp_batch_put(buf, h, sizeof(h), 1);
	/* cut short: in the record's prefix, in its head */
	off = 0;
	assert_int_equal(psl__ucxp_batch_next(buf, 5, &off, &head, &hl, &nseg), -EPROTO);
	off = 0;
	assert_int_equal(psl__ucxp_batch_next(buf, n - 1, &off, &head, &hl, &nseg), -EPROTO);
	/* a head that is not a multiple of 8 */
	buf[0] = 12;
	off = 0;
	assert_int_equal(psl__ucxp_batch_next(buf, n, &off, &head, &hl, &nseg), -EPROTO);
	/* a head longer than the payload (no wrap-around on 32-bit sums) */
	memset(buf, 0xff, 4);
	off = 0;
	assert_int_equal(psl__ucxp_batch_next(buf, n, &off, &head, &hl, &nseg), -EPROTO);
	/* too many segments */
	n = psl__ucxp_batch_put(buf, h, sizeof(h), UCXP_MAX_SEG + 1);
	off = 0;
	assert_int_equal(psl__ucxp_batch_next(buf, n, &off, &head, &hl, &nseg), -EPROTO);
	/* an offset past the end */
	off = n + 8;
	assert_int_equal(psl__ucxp_batch_next(buf, n, &off, &head, &hl, &nseg), -EPROTO);
}

/* ucp_ep_print_info of UCX 1.13.1, as printed here */
static const char ep_tcp[] =
	"#\n# UCP endpoint \n#\n#               peer: <no debug data>\n"
	"#                 lane[0]:  0:tcp/lo.0 md[0]                -> md[0]/tcp/sysdev[255] "
	"rma_bw#0 am am_bw#0\n"
	"#                 lane[1]:  1:tcp/eth0.0 md[0]              -> md[0]/tcp/sysdev[255] "
	"rma_bw#1 wireup\n#\n"
	"#                 am_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)\n";
static const char ep_shm[] =
	"#\n# UCP endpoint \n#\n#               peer: <no debug data>\n"
	"#                 lane[0]:  3:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] "
	"am am_bw#0\n"
	"#                 lane[1]:  5:cma/memory.0 md[4]            -> md[4]/cma/sysdev[255] "
	"rma_bw#0\n"
	"#                 lane[2]:  1:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] "
	"rma_bw#1 wireup\n";
/* an RDMA machine's, shaped the same way */
static const char ep_rc[] =
	"#                 lane[0]:  8:rc_mlx5/mlx5_0:1.0 md[5]      -> md[5]/ib/sysdev[255] "
	"rma_bw#0 am am_bw#0\n"
	"#                 lane[1]:  0:tcp/eth0.0 md[0]              -> md[0]/tcp/sysdev[255] "
	"wireup\n";

static void test_am_lane(void **state)
{
	char out[64];
	(void)state;
	assert_int_equal(psl__ucxp_am_lane(ep_tcp, out, sizeof(out)), 0);
	assert_string_equal(out, "tcp/lo");
	assert_int_equal(psl__ucxp_am_lane(ep_shm, out, sizeof(out)), 0);
	assert_string_equal(out, "sysv/memory");
	assert_int_equal(psl__ucxp_am_lane(ep_rc, out, sizeof(out)), 0);
	assert_string_equal(out, "rc_mlx5/mlx5_0:1");
	/* "am_bw" alone is not the active message lane; nothing found */
	assert_int_equal(psl__ucxp_am_lane("lane[0]:  0:tcp/lo.0 md[0] -> md[0] am_bw#0\n",
					   out, sizeof(out)),
			 -ENOENT);
	assert_int_equal(psl__ucxp_am_lane("", out, sizeof(out)), -ENOENT);
	assert_int_equal(psl__ucxp_am_lane("garbage -> am\nlane[ -> am", out, sizeof(out)),
			 -ENOENT);
	/* a buffer too small for the name: not found rather than cut */
	assert_int_equal(psl__ucxp_am_lane(ep_tcp, out, 4), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_greeting_ours),
		cmocka_unit_test(test_greeting_partial),
		cmocka_unit_test(test_greeting_other_van),
		cmocka_unit_test(test_greeting_zmtp),
		cmocka_unit_test(test_greeting_garbage),
		cmocka_unit_test(test_hello_roundtrip),
		cmocka_unit_test(test_hello_bad),
		cmocka_unit_test(test_welcome),
		cmocka_unit_test(test_am_hdr),
		cmocka_unit_test(test_batch_roundtrip),
		cmocka_unit_test(test_batch_bad),
		cmocka_unit_test(test_am_lane),
		cmocka_unit_test(test_am_hdr_inconsistent),
		cmocka_unit_test(test_head_roundtrip),
		cmocka_unit_test(test_head_bad),
		cmocka_unit_test(test_mem_caps),
		cmocka_unit_test(test_mem_check_host),
		cmocka_unit_test(test_mem_check_cuda_without_cuda),
		cmocka_unit_test(test_mem_check_cuda_with_cuda),
		cmocka_unit_test(test_mem_check_unknown),
		cmocka_unit_test(test_resources),
		cmocka_unit_test(test_tls_has_mm),
		cmocka_unit_test(test_rndv_put),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
