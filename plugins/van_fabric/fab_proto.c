/* van_fabric: wire formats and ordering (see fab_proto.h). */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pslite/van_util.h>

#include "fab_proto.h"

/* ---------------------------------------------------------------- header -- */

static size_t align8(size_t x)
{
	return (x + 7) & ~(size_t)7;
}

size_t fab_hdr_fixed_size(uint32_t nparts)
{
	return 16 + 8 * (size_t)nparts;
}

size_t fab_hdr_size(uint32_t nparts, const uint64_t *lens, const bool *inl)
{
	size_t n = fab_hdr_fixed_size(nparts);
	uint32_t i;
	for (i = 0; i < nparts; i++)
		if (inl[i])
			n = align8(n) + (size_t)lens[i];
	return n;
}

size_t fab_hdr_write(void *buf, uint32_t seq, uint32_t nparts, const uint64_t *lens,
		     const bool *inl, size_t *off)
{
	uint8_t *p = buf;
	size_t n = fab_hdr_fixed_size(nparts);
	uint32_t i;

	psl_van_put_le32(p, FAB_HDR_MAGIC);
	psl_van_put_le32(p + 4, seq);
	psl_van_put_le32(p + 8, nparts);
	psl_van_put_le32(p + 12, 0);
	for (i = 0; i < nparts; i++) {
		psl_van_put_le64(p + 16 + 8 * (size_t)i, lens[i] | (inl[i] ? FAB_PART_INLINE : 0));
		if (inl[i]) {
			n = align8(n);
			off[i] = n;
			n += (size_t)lens[i];
		} else {
			off[i] = 0;
		}
	}
	return n;
}

int fab_hdr_parse(const void *buf, size_t n, struct fab_hdr_view *v, char *why, size_t whylen)
{
	const uint8_t *p = buf;
	size_t end;
	uint32_t i;

	if (n < 16) {
		snprintf(why, whylen, "header of %zu bytes is shorter than 16", n);
		return -EPROTO;
	}
	if (psl_van_get_le32(p) != FAB_HDR_MAGIC) {
		snprintf(why, whylen, "bad header magic 0x%08x", psl_van_get_le32(p));
		return -EPROTO;
	}
	v->seq = psl_van_get_le32(p + 4);
	v->nparts = psl_van_get_le32(p + 8);
	if (v->nparts < 1 || v->nparts > FAB_MAX_PARTS) {
		snprintf(why, whylen, "%u parts (expected 1 to %d)", v->nparts, FAB_MAX_PARTS);
		return -EPROTO;
	}
	end = fab_hdr_fixed_size(v->nparts);
	if (end > n) {
		snprintf(why, whylen, "%u part descriptors do not fit in %zu bytes", v->nparts, n);
		return -EPROTO;
	}
	for (i = 0; i < v->nparts; i++) {
		uint64_t d = psl_van_get_le64(p + 16 + 8 * (size_t)i);
		v->inl[i] = (d & FAB_PART_INLINE) != 0;
		v->len[i] = d & ~FAB_PART_INLINE;
		v->off[i] = 0;
		if (v->inl[i]) {
			end = align8(end);
			if (v->len[i] > n || end + v->len[i] > n) {
				snprintf(why, whylen, "inline part %u (%llu bytes) runs past the end "
						      "of the %zu-byte header",
					 i, (unsigned long long)v->len[i], n);
				return -EPROTO;
			}
			v->off[i] = end;
			end += (size_t)v->len[i];
		} else if (v->len[i] > ((uint64_t)1 << 48)) {
			snprintf(why, whylen, "part %u claims %llu bytes", i,
				 (unsigned long long)v->len[i]);
			return -EPROTO;
		}
	}
	return 0;
}

/* ----------------------------------------------------------------- hello -- */

void fab_hello_pack(const struct fab_hello *h, uint8_t out[FAB_HELLO_WIRE])
{
	memset(out, 0, FAB_HELLO_WIRE);
	psl_van_put_le32(out, FAB_HELLO_MAGIC);
	psl_van_put_le32(out + 4, (FAB_HELLO_VERSION << 16) | (h->kind & 0xffffu));
	psl_van_put_le32(out + 8, (uint32_t)h->node_id);
	psl_van_put_le32(out + 12, h->stream);
	psl_van_put_le32(out + 16, h->seq);
	psl_van_put_le32(out + 20, h->hdr_max);
	psl_van_put_le32(out + 24, h->addr_len > FAB_ADDR_MAX ? FAB_ADDR_MAX : h->addr_len);
	memcpy(out + 28, h->addr, FAB_ADDR_MAX);
	memcpy(out + 92, h->prov, sizeof(h->prov) - 1);
	memcpy(out + 140, h->text, 155);
	/* 295 bytes used, the last one stays 0 */
}

int fab_hello_unpack(const uint8_t in[FAB_HELLO_WIRE], struct fab_hello *h)
{
	uint32_t kv;
	memset(h, 0, sizeof(*h));
	if (psl_van_get_le32(in) != FAB_HELLO_MAGIC)
		return -EPROTO;
	kv = psl_van_get_le32(in + 4);
	if ((kv >> 16) != FAB_HELLO_VERSION)
		return -EPROTONOSUPPORT;
	h->kind = kv & 0xffffu;
	h->node_id = (int32_t)psl_van_get_le32(in + 8);
	h->stream = psl_van_get_le32(in + 12);
	h->seq = psl_van_get_le32(in + 16);
	h->hdr_max = psl_van_get_le32(in + 20);
	h->addr_len = psl_van_get_le32(in + 24);
	if (h->addr_len > FAB_ADDR_MAX || h->kind < FAB_HELLO || h->kind > FAB_BYE)
		return -EPROTO;
	memcpy(h->addr, in + 28, FAB_ADDR_MAX);
	memcpy(h->prov, in + 92, sizeof(h->prov) - 1);
	memcpy(h->text, in + 140, 155);
	return 0;
}

/* ---------------------------------------------------------- stream order -- */

int fab_oq_add(struct fab_oq *q, struct fab_oq_ent *e, uint32_t window)
{
	struct fab_oq_ent **pp = &q->head;
	uint32_t d = e->seq - q->next; /* distance ahead, modulo 2^32 */

	if (d >= 0x80000000u)
		return -EEXIST; /* already delivered */
	if (d > window)
		return -ERANGE;
	while (*pp && (*pp)->seq - q->next < d)
		pp = &(*pp)->next;
	if (*pp && (*pp)->seq == e->seq)
		return -EEXIST;
	e->next = *pp;
	*pp = e;
	q->count++;
	return 0;
}

struct fab_oq_ent *fab_oq_pop(struct fab_oq *q)
{
	struct fab_oq_ent *e = q->head;
	if (!e || e->seq != q->next || !e->complete)
		return NULL;
	q->head = e->next;
	q->next++;
	q->count--;
	e->next = NULL;
	return e;
}

/* --------------------------------------------------------- FI_PROVIDER -- */

/* does the comma list contain a component of prov (split at ';')? */
static bool list_has(const char *list, const char *prov)
{
	const char *p = list;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		const char *q = prov;
		while (*q) {
			const char *qe = strchr(q, ';');
			size_t ql = qe ? (size_t)(qe - q) : strlen(q);
			if (ql == l && !strncmp(p, q, l))
				return true;
			q += ql;
			if (*q == ';')
				q++;
		}
		p += l;
		if (*p == ',')
			p++;
	}
	return false;
}

bool fab_prov_match(const char *filter, const char *prov)
{
	if (!filter || !*filter)
		return true;
	if (!prov)
		return false;
	if (filter[0] == '^')
		return !list_has(filter + 1, prov);
	return list_has(filter, prov);
}
