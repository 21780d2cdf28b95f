/* C++ ps-lite RDMA van records (ibv_cxx.h). */
#include "ibv_cxx.h"

#include <errno.h>
#include <string.h>

#include <pslite/van_util.h>

#include "ibv_wire.h"

size_t ibv_cxx_conn_encode(void *buf, const struct ibv_cxx_conn *c)
{
	uint8_t *b = buf;
	size_t n = strnlen(c->host, IBV_CXX_HOST_LEN - 1);

	memset(b, 0, IBV_CXX_REQ_LEN);
	psl_van_put_le32(b, c->node);
	psl_van_put_le16(b + 4, c->port);
	memcpy(b + 6, c->host, n);
	return IBV_CXX_REQ_LEN;
}

int ibv_cxx_conn_decode(const void *buf, size_t len, struct ibv_cxx_conn *c, const char **why)
{
	const uint8_t *b = buf;
	size_t i;

	if (!b || len < IBV_CXX_REQ_LEN) {
		*why = "connection record shorter than C++ ps-lite's";
		return -EPROTO;
	}
	if (!memcmp(b, IBV_WIRE_MAGIC, 4)) {
		*why = "a van_ibverbs record";
		return -EPROTO;
	}
	c->node = psl_van_get_le32(b);
	c->port = psl_van_get_le16(b + 4);
	if (c->node < 1 || c->node > INT32_MAX) {
		*why = "node id out of range";
		return -EPROTO;
	}
	for (i = 0; i < IBV_CXX_HOST_LEN && b[6 + i]; i++)
		if (b[6 + i] < 0x21 || b[6 + i] > 0x7e) {
			*why = "host name not printable";
			return -EPROTO;
		}
	if (i == 0 || i == IBV_CXX_HOST_LEN) {
		*why = i ? "host name not terminated" : "no host name";
		return -EPROTO;
	}
	memcpy(c->host, b + 6, i);
	c->host[i] = 0;
	return 0;
}

size_t ibv_cxx_start_encode(void *buf, const struct ibv_cxx_start *s)
{
	uint8_t *b = buf;
	int i;

	psl_van_put_le64(b, s->meta_len);
	psl_van_put_le64(b + 8, s->nseg);
	for (i = 0; i < IBV_CXX_MAX_SEGS; i++)
		psl_van_put_le64(b + 16 + 8 * i, (uint64_t)i < s->nseg ? s->len[i] : 0);
	psl_van_put_le64(b + 48, s->cookie);
	return IBV_CXX_START_LEN;
}

int ibv_cxx_start_decode(const void *buf, size_t len, struct ibv_cxx_start *s, const char **why)
{
	const uint8_t *b = buf;
	int i;

	if (!b || len < IBV_CXX_START_LEN) {
		*why = "rendezvous start too short";
		return -EPROTO;
	}
	s->meta_len = psl_van_get_le64(b);
	s->nseg = psl_van_get_le64(b + 8);
	for (i = 0; i < IBV_CXX_MAX_SEGS; i++)
		s->len[i] = psl_van_get_le64(b + 16 + 8 * i);
	s->cookie = psl_van_get_le64(b + 48);
	if (s->meta_len == 0 || s->meta_len > IBV_CXX_MAX_META) {
		*why = "rendezvous start: meta length out of range";
		return -EPROTO;
	}
	if (s->nseg > IBV_CXX_MAX_SEGS) {
		*why = "rendezvous start: more than 4 segments";
		return -EPROTO;
	}
	if (!ibv_cxx_buf_len(s)) {
		*why = "rendezvous start: segment lengths overflow";
		return -EPROTO;
	}
	return 0;
}

size_t ibv_cxx_reply_encode(void *buf, const struct ibv_cxx_reply *r)
{
	uint8_t *b = buf;

	psl_van_put_le64(b, r->addr);
	psl_van_put_le64(b + 8, r->cookie);
	psl_van_put_le32(b + 16, r->rkey);
	psl_van_put_le32(b + 20, r->idx);
	return IBV_CXX_REPLY_LEN;
}

int ibv_cxx_reply_decode(const void *buf, size_t len, uint32_t pool, struct ibv_cxx_reply *r,
			 const char **why)
{
	const uint8_t *b = buf;

	if (!b || len < IBV_CXX_REPLY_LEN) {
		*why = "rendezvous reply too short";
		return -EPROTO;
	}
	r->addr = psl_van_get_le64(b);
	r->cookie = psl_van_get_le64(b + 8);
	r->rkey = psl_van_get_le32(b + 16);
	r->idx = psl_van_get_le32(b + 20);
	if (!r->addr) {
		*why = "rendezvous reply: no buffer address";
		return -EPROTO;
	}
	if (r->idx >= (pool ? pool : IBV_CXX_POOL_DEFAULT)) {
		*why = "rendezvous reply: pool index out of range (BYTEPS_ADDRESS_POOL_SIZE "
		       "differs between the nodes?)";
		return -EPROTO;
	}
	return 0;
}

uint64_t ibv_cxx_data_offset(uint64_t meta_len)
{
	return (meta_len + IBV_CXX_PAGE - 1) / IBV_CXX_PAGE * IBV_CXX_PAGE;
}

uint64_t ibv_cxx_buf_len(const struct ibv_cxx_start *s)
{
	uint64_t n;
	uint64_t i;

	if (s->meta_len > IBV_CXX_MAX_META || s->nseg > IBV_CXX_MAX_SEGS)
		return 0;
	n = ibv_cxx_data_offset(s->meta_len);
	for (i = 0; i < s->nseg; i++) {
		if (s->len[i] > UINT64_MAX / 2 - n)
			return 0;
		n += s->len[i];
	}
	return n;
}
