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

/* ------------------------------------------------------------------ meta -- */

/* Offsets in the fixed part of a ps-lite meta (docs/wire.md §4.2). */
enum {
	M_HEAD = 0,
	M_BODY = 4,
	M_CMD = 8,
	M_REQUEST = 32,
	M_NTYPES = 44,
	M_PUSH = 68,
	M_SIMPLE_APP = 69,
	M_KEY = 80,
	M_ADDR = 88,
	M_VAL_LEN = 96,
	M_OPTION = 100,
	M_FIXED = 112,
};

int ibv_cxx_meta_peek(const void *meta, size_t len, struct ibv_cxx_meta *m, const char **why)
{
	const uint8_t *b = meta;
	int32_t body, nt;

	memset(m, 0, sizeof(*m));
	m->vtype = -1;
	if (!b || len < M_FIXED) {
		*why = "meta shorter than ps-lite's fixed part";
		return -EPROTO;
	}
	body = (int32_t)psl_van_get_le32(b + M_BODY);
	nt = (int32_t)psl_van_get_le32(b + M_NTYPES);
	if (body < 0 || nt < 0 || nt > 16 || (uint64_t)M_FIXED + (uint64_t)body + 4u * (uint64_t)nt > len) {
		*why = "meta with a body or data types beyond its end";
		return -EPROTO;
	}
	if (b[M_REQUEST] > 1 || b[M_PUSH] > 1 || b[M_SIMPLE_APP] > 1) {
		*why = "meta with a flag that is neither 0 nor 1";
		return -EPROTO;
	}
	m->key = psl_van_get_le64(b + M_KEY);
	m->addr = psl_van_get_le64(b + M_ADDR);
	m->val_len = (int32_t)psl_van_get_le32(b + M_VAL_LEN);
	m->option = (int32_t)psl_van_get_le32(b + M_OPTION);
	if (nt >= 2)
		m->vtype = (int32_t)psl_van_get_le32(b + M_FIXED + (uint32_t)body + 4);
	if (psl_van_get_le32(b + M_CMD) != 0 || b[M_SIMPLE_APP])
		m->kind = IBV_CXX_OTHER;
	else if (b[M_REQUEST])
		m->kind = b[M_PUSH] ? IBV_CXX_PUSH_REQ : IBV_CXX_PULL_REQ;
	else
		m->kind = b[M_PUSH] ? IBV_CXX_PUSH_RESP : IBV_CXX_PULL_RESP;
	return 0;
}

void ibv_cxx_meta_set_key(void *meta, uint64_t key)
{
	psl_van_put_le64((uint8_t *)meta + M_KEY, key);
}

void ibv_cxx_meta_set_val_len(void *meta, int32_t n)
{
	psl_van_put_le32((uint8_t *)meta + M_VAL_LEN, (uint32_t)n);
}

void ibv_cxx_meta_set_option(void *meta, int32_t n)
{
	psl_van_put_le32((uint8_t *)meta + M_OPTION, (uint32_t)n);
}

/* Data types whose values C++ counts right: one byte each (docs/wire.md §4.5). */
static bool byte_type(int32_t t)
{
	return t == -1 || t == 0 || t == 1 || t == 5 || t == 11;
}

int ibv_cxx_plan(void *meta, size_t meta_len, const uint64_t *lens, const void *keys,
		 uint32_t nseg, struct ibv_cxx_plan *p, const char **why)
{
	struct ibv_cxx_meta m;
	uint32_t i;
	int rc;

	memset(p, 0, sizeof(*p));
	p->data_seg = -1;
	rc = ibv_cxx_meta_peek(meta, meta_len, &m, why);
	if (rc)
		return rc;
	if (meta_len > IBV_CXX_MAX_META) {
		*why = "meta larger than a C++ ps-lite node takes";
		return -EMSGSIZE;
	}
	p->kind = m.kind;
	p->start.meta_len = meta_len;
	if (m.kind == IBV_CXX_OTHER) {
		/* control and SimpleApp: C++ carries the meta alone */
		p->need = meta_len;
		return 0;
	}
	if (nseg > IBV_CXX_MAX_SEGS) {
		*why = "a KV message with more than 4 data segments";
		return -EPROTO;
	}
	if (nseg && lens[0] != 8 && (m.kind == IBV_CXX_PUSH_REQ || m.kind == IBV_CXX_PULL_REQ ||
				    m.kind == IBV_CXX_PULL_RESP)) {
		*why = "a KV message with other than one key (C++ ps-lite's RDMA van carries one "
		       "key per message: slice requests to one key each)";
		return -EPROTO;
	}
	if (nseg >= 2 && !byte_type(m.vtype)) {
		*why = "values of a data type wider than one byte (C++ ps-lite's RDMA van counts "
		       "val_len in bytes: use bytes, int8 or uint8 values with C++ RDMA nodes)";
		return -EPROTO;
	}
	for (i = 0; i < nseg; i++)
		if (lens[i] > INT32_MAX) {
			*why = "a segment of 2 GiB or more";
			return -EMSGSIZE;
		}
	switch (m.kind) {
	case IBV_CXX_PUSH_REQ:
		if (nseg < 2 || (nseg == 3 && lens[2] != 4) || nseg > 3) {
			*why = "a push without values, or with lens other than one";
			return -EPROTO;
		}
		p->key = psl_van_get_le64(keys);
		ibv_cxx_meta_set_key(meta, p->key);
		ibv_cxx_meta_set_val_len(meta, (int32_t)lens[1]);
		/* C++ always announces keys, values and lens */
		p->start.nseg = 3;
		p->start.len[0] = 8;
		p->start.len[1] = lens[1];
		p->start.len[2] = 4;
		p->data_seg = lens[1] ? 1 : -1;
		break;
	case IBV_CXX_PULL_REQ:
		if (nseg < 1) {
			*why = "a pull without keys";
			return -EPROTO;
		}
		if (m.val_len <= 0 || !m.addr) {
			*why = "a pull without room for its answer (val_len 0: a capacity that does "
			       "not divide evenly over the keys?)";
			return -EPROTO;
		}
		p->key = psl_van_get_le64(keys);
		ibv_cxx_meta_set_key(meta, p->key);
		p->pull_addr = m.addr;
		p->pull_len = (uint64_t)m.val_len;
		p->start.nseg = nseg;
		for (i = 0; i < nseg; i++)
			p->start.len[i] = lens[i];
		break;
	case IBV_CXX_PULL_RESP:
		p->key = m.key;
		p->start.nseg = nseg;
		for (i = 0; i < nseg; i++)
			p->start.len[i] = lens[i];
		if (nseg >= 2) {
			if (!m.addr) {
				*why = "a pull answer for a request without an address";
				return -EPROTO;
			}
			ibv_cxx_meta_set_val_len(meta, (int32_t)lens[1]);
			p->data_seg = lens[1] ? 1 : -1;
		}
		break;
	default: /* push answer */
		p->key = m.key;
		p->start.nseg = nseg;
		for (i = 0; i < nseg; i++)
			p->start.len[i] = lens[i];
		break;
	}
	p->need = ibv_cxx_buf_len(&p->start);
	return 0;
}

int ibv_cxx_unpack(const void *meta, size_t meta_len, uint64_t buf_len, struct ibv_cxx_in *in,
		   const char **why)
{
	struct ibv_cxx_meta m;
	int rc;

	memset(in, 0, sizeof(*in));
	rc = ibv_cxx_meta_peek(meta, meta_len, &m, why);
	if (rc)
		return rc;
	in->kind = m.kind;
	in->key = m.key;
	in->val_len = m.val_len;
	switch (m.kind) {
	case IBV_CXX_PUSH_REQ:
		in->vals_off = ibv_cxx_data_offset(meta_len);
		if (m.val_len < 0 || in->vals_off + (uint64_t)m.val_len > buf_len) {
			*why = "push values beyond the buffer its rendezvous announced";
			return -EPROTO;
		}
		in->nseg = 3;
		break;
	case IBV_CXX_PULL_REQ:
		in->nseg = 2;
		break;
	case IBV_CXX_PULL_RESP:
		if (m.val_len < 0 || !m.addr) {
			*why = "pull answer without a length or an address";
			return -EPROTO;
		}
		in->vals_addr = m.addr;
		in->nseg = 3;
		break;
	default:
		in->nseg = 0;
		break;
	}
	return 0;
}
