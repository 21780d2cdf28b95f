/* van_ibverbs wire records (see ibv_wire.h). */
#include <errno.h>
#include <string.h>

#include <pslite/van_util.h>

#include "ibv_wire.h"

static void put_head(uint8_t *b, uint8_t version, uint8_t a, uint8_t c)
{
	memcpy(b, IBV_WIRE_MAGIC, 4);
	b[4] = version;
	b[5] = a;
	b[6] = c;
	b[7] = 0;
}

static int check_head(const uint8_t *b, size_t len, size_t need, const char **why)
{
	if (len < 5 || memcmp(b, IBV_WIRE_MAGIC, 4) != 0) {
		*why = "not a van_ibverbs connection record";
		return -EPROTO;
	}
	if (b[4] != IBV_WIRE_VERSION) {
		*why = "another van_ibverbs wire version";
		return -EPROTONOSUPPORT;
	}
	if (len < need) {
		*why = "connection record too short";
		return -EPROTO;
	}
	return 0;
}

size_t ibv_conn_req_encode(void *buf, const struct ibv_conn_req *r)
{
	uint8_t *b = buf;
	put_head(b, IBV_WIRE_VERSION, r->qp_index, r->nqp);
	psl_van_put_le32(b + 8, (uint32_t)r->sender);
	psl_van_put_le32(b + 12, r->rx_depth);
	psl_van_put_le32(b + 16, r->rx_buf);
	psl_van_put_le64(b + 20, r->nonce);
	if (!(r->flags & IBV_REQ_F_PROOF))
		return IBV_CONN_REQ_LEN;
	b[7] = IBV_REQ_F_PROOF;
	/* the link nonce is the proof nonce's first half, already at 20 */
	memcpy(b + 28, r->proof + 8, PSL_VAN_PROOF_LEN - 8);
	return IBV_CONN_REQ_PROOF_LEN;
}

static int check_queues(uint8_t qi, uint8_t nqp, uint32_t depth, uint32_t rxbuf, const char **why)
{
	if (nqp == 0 || nqp > IBV_MAX_QPS || qi >= nqp) {
		*why = "queue pair index out of range";
		return -EPROTO;
	}
	if (depth == 0 || depth > 65535 || rxbuf < 64 || rxbuf > (64u << 20)) {
		*why = "receive queue depth or buffer size out of range";
		return -EPROTO;
	}
	return 0;
}

int ibv_conn_req_decode(const void *buf, size_t len, struct ibv_conn_req *r, const char **why)
{
	const uint8_t *b = buf;
	int rc = check_head(b, len, IBV_CONN_REQ_LEN, why);
	if (rc)
		return rc;
	r->version = b[4];
	r->qp_index = b[5];
	r->nqp = b[6];
	r->sender = (int32_t)psl_van_get_le32(b + 8);
	r->rx_depth = psl_van_get_le32(b + 12);
	r->rx_buf = psl_van_get_le32(b + 16);
	r->nonce = psl_van_get_le64(b + 20);
	r->flags = b[7];
	if (r->flags & ~IBV_REQ_F_PROOF) {
		*why = "unknown flags";
		return -EPROTO;
	}
	if (r->flags & IBV_REQ_F_PROOF) {
		if (len < IBV_CONN_REQ_PROOF_LEN) {
			*why = "connection record too short for its proof";
			return -EPROTO;
		}
		memcpy(r->proof, b + 20, 8);
		memcpy(r->proof + 8, b + 28, PSL_VAN_PROOF_LEN - 8);
	}
	if (r->sender < 1 || r->sender > PSL_VAN_ID_NONE) {
		*why = "sender node id out of range";
		return -EPROTO;
	}
	return check_queues(r->qp_index, r->nqp, r->rx_depth, r->rx_buf, why);
}

size_t ibv_conn_acc_encode(void *buf, const struct ibv_conn_acc *a)
{
	uint8_t *b = buf;
	put_head(b, IBV_WIRE_VERSION, a->qp_index, a->nqp);
	psl_van_put_le32(b + 8, a->rx_depth);
	psl_van_put_le32(b + 12, a->rx_buf);
	return IBV_CONN_ACC_LEN;
}

int ibv_conn_acc_decode(const void *buf, size_t len, struct ibv_conn_acc *a, const char **why)
{
	const uint8_t *b = buf;
	int rc = check_head(b, len, IBV_CONN_ACC_LEN, why);
	if (rc)
		return rc;
	a->version = b[4];
	a->qp_index = b[5];
	a->nqp = b[6];
	a->rx_depth = psl_van_get_le32(b + 8);
	a->rx_buf = psl_van_get_le32(b + 12);
	return check_queues(a->qp_index, a->nqp, a->rx_depth, a->rx_buf, why);
}

size_t ibv_conn_rej_encode(void *buf, int reason)
{
	uint8_t *b = buf;
	put_head(b, IBV_WIRE_VERSION, (uint8_t)reason, 0);
	return IBV_CONN_REJ_LEN;
}

int ibv_conn_rej_decode(const void *buf, size_t len)
{
	const uint8_t *b = buf;
	if (!buf || len < IBV_CONN_REJ_LEN || memcmp(b, IBV_WIRE_MAGIC, 4) != 0)
		return -1;
	return b[5];
}

size_t ibv_msg_size(uint32_t nseg, uint32_t meta_len, const struct ibv_wseg *segs)
{
	uint64_t n = IBV_MSG_HDR_LEN + (uint64_t)nseg * IBV_SEG_DESC_LEN + meta_len;
	uint32_t i;
	if (nseg > IBV_MAX_SEGS)
		return 0;
	for (i = 0; i < nseg; i++) {
		if (segs[i].remote)
			continue;
		if (segs[i].len > (1ull << 40))
			return 0;
		n += segs[i].len;
	}
	return n > (1ull << 40) ? 0 : (size_t)n;
}

size_t ibv_msg_rec_size(const struct ibv_msg_hdr *h, const struct ibv_wseg *segs)
{
	size_t n;
	if (!h->meta_remote)
		return ibv_msg_size(h->nseg, h->meta_len, segs);
	n = ibv_msg_size(h->nseg, 0, segs);
	return n ? n + IBV_SEG_DESC_LEN : 0;
}

static uint8_t *put_desc(uint8_t *p, uint64_t len, uint64_t addr, uint32_t rkey, bool remote)
{
	psl_van_put_le64(p, len);
	psl_van_put_le64(p + 8, remote ? addr : 0);
	psl_van_put_le32(p + 16, remote ? rkey : 0);
	psl_van_put_le32(p + 20, remote ? 1 : 0);
	return p + IBV_SEG_DESC_LEN;
}

size_t ibv_msg_encode(void *buf, size_t cap, const struct ibv_msg_hdr *h, const void *meta,
		      const struct ibv_wseg *segs)
{
	uint8_t *b = buf, *p;
	size_t n = ibv_msg_rec_size(h, segs);
	uint32_t i;

	if (n == 0 || n > cap)
		return 0;
	b[0] = IBV_REC_MSG;
	b[1] = h->meta_remote ? IBV_MSG_F_META_RDV : 0;
	psl_van_put_le16(b + 2, h->credits);
	psl_van_put_le32(b + 4, h->nseg);
	psl_van_put_le64(b + 8, h->seq);
	psl_van_put_le32(b + 16, h->meta_len);
	psl_van_put_le32(b + 20, 0);
	psl_van_put_le64(b + 24, h->token);
	p = b + IBV_MSG_HDR_LEN;
	for (i = 0; i < h->nseg; i++)
		p = put_desc(p, segs[i].len, segs[i].addr, segs[i].rkey, segs[i].remote);
	if (h->meta_remote) {
		p = put_desc(p, h->meta_len, h->meta_addr, h->meta_rkey, true);
	} else {
		if (h->meta_len)
			memcpy(p, meta, h->meta_len);
		p += h->meta_len;
	}
	for (i = 0; i < h->nseg; i++) {
		if (segs[i].remote || !segs[i].len)
			continue;
		memcpy(p, segs[i].data, segs[i].len);
		p += segs[i].len;
	}
	return n;
}

/* The meta's descriptor of a IBV_MSG_F_META_RDV record, at p. */
static int decode_meta_desc(const uint8_t *p, struct ibv_msg_hdr *h, const char **why)
{
	h->meta_addr = psl_van_get_le64(p + 8);
	h->meta_rkey = psl_van_get_le32(p + 16);
	if (psl_van_get_le64(p) != h->meta_len || psl_van_get_le32(p + 20) != 1u ||
	    h->meta_len == 0 || h->meta_len > IBV_MAX_META_RDV || h->meta_addr == 0) {
		*why = "bad rendezvous meta";
		return -EPROTO;
	}
	return 0;
}

/* Decodes one segment descriptor at p; inline data is taken from *data. */
static int decode_seg(const uint8_t *p, struct ibv_wseg *sg, const uint8_t **data, uint64_t *left,
		      const char **why)
{
	uint32_t flags = psl_van_get_le32(p + 20);
	sg->len = psl_van_get_le64(p);
	sg->addr = psl_van_get_le64(p + 8);
	sg->rkey = psl_van_get_le32(p + 16);
	if (flags & ~1u) {
		*why = "unknown segment flags";
		return -EPROTO;
	}
	sg->remote = flags & 1u;
	sg->data = NULL;
	if (sg->remote) {
		if (sg->len == 0 || sg->len > (1ull << 40) || sg->addr == 0) {
			*why = "bad rendezvous segment";
			return -EPROTO;
		}
		return 0;
	}
	if (sg->addr || sg->rkey) {
		*why = "inline segment with an address";
		return -EPROTO;
	}
	if (sg->len > *left) {
		*why = "inline segment longer than the record";
		return -EPROTO;
	}
	sg->data = *data;
	*data += sg->len;
	*left -= sg->len;
	return 0;
}

static int decode_head(const uint8_t *b, size_t len, struct ibv_msg_hdr *h, const char **why)
{
	if (len < IBV_MSG_HDR_LEN || b[0] != IBV_REC_MSG) {
		*why = "not a message record";
		return -EPROTO;
	}
	if (b[1] & ~IBV_MSG_F_META_RDV) {
		*why = "unknown record flags";
		return -EPROTO;
	}
	h->meta_remote = b[1] & IBV_MSG_F_META_RDV;
	h->credits = psl_van_get_le16(b + 2);
	h->nseg = psl_van_get_le32(b + 4);
	h->seq = psl_van_get_le64(b + 8);
	h->meta_len = psl_van_get_le32(b + 16);
	h->token = psl_van_get_le64(b + 24);
	h->meta_addr = 0;
	h->meta_rkey = 0;
	if (h->nseg > IBV_MAX_SEGS) {
		*why = "too many segments";
		return -EPROTO;
	}
	return 0;
}

int ibv_msg_decode(const void *buf, size_t len, struct ibv_msg_hdr *h, struct ibv_wseg *segs,
		   const void **meta, const char **why)
{
	const uint8_t *b = buf, *p, *data;
	uint64_t need, left;
	uint32_t i;
	bool any_remote;

	if (decode_head(b, len, h, why))
		return -EPROTO;
	need = IBV_MSG_HDR_LEN + (uint64_t)h->nseg * IBV_SEG_DESC_LEN;
	need += h->meta_remote ? IBV_SEG_DESC_LEN : h->meta_len;
	if (need > len) {
		*why = "record shorter than its descriptors and meta";
		return -EPROTO;
	}
	left = len - need;
	p = b + IBV_MSG_HDR_LEN;
	data = b + need;
	any_remote = h->meta_remote;
	for (i = 0; i < h->nseg; i++, p += IBV_SEG_DESC_LEN) {
		if (decode_seg(p, &segs[i], &data, &left, why))
			return -EPROTO;
		any_remote = any_remote || segs[i].remote;
	}
	if (h->meta_remote && decode_meta_desc(p, h, why))
		return -EPROTO;
	if (left) {
		*why = "record longer than its contents";
		return -EPROTO;
	}
	if (any_remote != (h->token != 0)) {
		*why = "rendezvous token and segments disagree";
		return -EPROTO;
	}
	*meta = h->meta_remote ? NULL : p;
	return 0;
}

size_t ibv_fin_encode(void *buf, uint16_t credits, int32_t status, uint64_t token)
{
	uint8_t *b = buf;
	b[0] = IBV_REC_FIN;
	b[1] = 0;
	psl_van_put_le16(b + 2, credits);
	psl_van_put_le32(b + 4, (uint32_t)status);
	psl_van_put_le64(b + 8, token);
	return IBV_FIN_LEN;
}

size_t ibv_credit_encode(void *buf, uint16_t credits)
{
	uint8_t *b = buf;
	b[0] = IBV_REC_CREDIT;
	b[1] = 0;
	psl_van_put_le16(b + 2, credits);
	psl_van_put_le32(b + 4, 0);
	return IBV_CREDIT_LEN;
}

int ibv_rec_peek(const void *buf, size_t len, int *type, uint16_t *credits, int32_t *status,
		 uint64_t *token, const char **why)
{
	const uint8_t *b = buf;
	if (len < 4) {
		*why = "record too short";
		return -EPROTO;
	}
	*type = b[0];
	*credits = psl_van_get_le16(b + 2);
	switch (b[0]) {
	case IBV_REC_MSG:
		return 0;
	case IBV_REC_FIN:
		if (len != IBV_FIN_LEN) {
			*why = "completion record of the wrong length";
			return -EPROTO;
		}
		*status = (int32_t)psl_van_get_le32(b + 4);
		*token = psl_van_get_le64(b + 8);
		if (*token == 0 || *status > 0 || *status < -4095) {
			*why = "completion record with a bad token or status";
			return -EPROTO;
		}
		return 0;
	case IBV_REC_CREDIT:
		if (len != IBV_CREDIT_LEN) {
			*why = "credit record of the wrong length";
			return -EPROTO;
		}
		return 0;
	default:
		*why = "unknown record type";
		return -EPROTO;
	}
}
