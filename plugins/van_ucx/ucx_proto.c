/* van_ucx: wire formats and run-time decisions (see ucx_proto.h). */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pslite/van.h>
#include <pslite/van_util.h>

#include "ucx_proto.h"

#define AM_MAGIC 0x314d4355u	/* "UCM1" */
#define HELLO_MAGIC 0x68584355u /* "UCXh" */
#define WELCOME_MAGIC 0x77584355u /* "UCXw" */

/* ------------------------------------------------------------ greeting -- */

size_t psl__ucxp_greeting(char *buf, size_t len)
{
	return psl_van_greeting_build(buf, len, UCXP_VAN_NAME);
}

int psl__ucxp_classify(const uint8_t *buf, size_t len, size_t *used, char *other,
		       size_t other_len)
{
	char name[PSL_VAN_NAME_LEN_MAX + 1];
	size_t n = 0;

	*used = 0;
	if (other_len)
		other[0] = 0;
	switch (psl_van_greeting_parse(buf, len, name, sizeof(name), &n)) {
	case PSL_VAN_GREET_MORE:
		return UCXP_PEER_NEED_MORE;
	case PSL_VAN_GREET_ZMTP:
		return UCXP_PEER_ZMTP;
	case PSL_VAN_GREET_OK:
		break;
	default:
		return UCXP_PEER_UNKNOWN;
	}
	*used = n;
	if (!strcmp(name, UCXP_VAN_NAME))
		return UCXP_PEER_UCX;
	if (other_len)
		snprintf(other, other_len, "%s", name);
	return UCXP_PEER_OTHER_VAN;
}

const char *psl__ucxp_peer_desc(int kind, const char *other, char *buf, size_t len)
{
	static const int greet[] = {
		[UCXP_PEER_UCX] = PSL_VAN_GREET_OK,
		[UCXP_PEER_OTHER_VAN] = PSL_VAN_GREET_OK,
		[UCXP_PEER_ZMTP] = PSL_VAN_GREET_ZMTP,
		[UCXP_PEER_UNKNOWN] = PSL_VAN_GREET_OTHER,
	};
	int g = kind >= 0 && kind <= UCXP_PEER_UNKNOWN && kind != UCXP_PEER_NEED_MORE
			? greet[kind]
			: PSL_VAN_GREET_OTHER;
	const char *name = kind == UCXP_PEER_UCX ? UCXP_VAN_NAME : (other && *other ? other : "?");
	const char *w = psl_van_greeting_what(g, name, buf, len);
	if (w != buf)
		snprintf(buf, len, "%s", w);
	return buf;
}

/* ------------------------------------------------------ hello, welcome -- */

void psl__ucxp_hello_encode(const struct ucxp_hello *h, uint8_t out[UCXP_HELLO_SIZE])
{
	psl_van_put_le32(out, HELLO_MAGIC);
	psl_van_put_le16(out + 4, h->version);
	psl_van_put_le16(out + 6, h->flags);
	psl_van_put_le32(out + 8, (uint32_t)h->node_id);
	psl_van_put_le32(out + 12, h->ucx_version);
}

int psl__ucxp_hello_decode(const uint8_t *buf, size_t len, struct ucxp_hello *h)
{
	if (len >= 4 && psl_van_get_le32(buf) != HELLO_MAGIC)
		return -EPROTO;
	if (len < UCXP_HELLO_SIZE)
		return -EAGAIN;
	h->version = psl_van_get_le16(buf + 4);
	h->flags = psl_van_get_le16(buf + 6);
	h->node_id = (int32_t)psl_van_get_le32(buf + 8);
	h->ucx_version = psl_van_get_le32(buf + 12);
	if (h->version != UCXP_PROTO_VERSION)
		return -EPROTO;
	if (h->node_id != PSL_VAN_ID_NONE && (h->node_id < 1 || h->node_id > 65535))
		return -EPROTO;
	return 0;
}

void psl__ucxp_welcome_encode(const struct ucxp_welcome *w, uint8_t out[UCXP_WELCOME_SIZE])
{
	psl_van_put_le32(out, WELCOME_MAGIC);
	psl_van_put_le16(out + 4, w->version);
	psl_van_put_le16(out + 6, w->status);
	psl_van_put_le32(out + 8, w->conn);
	psl_van_put_le32(out + 12, w->nonce);
	psl_van_put_le32(out + 16, w->ucx_version);
	psl_van_put_le32(out + 20, w->addr_len);
}

int psl__ucxp_welcome_decode(const uint8_t *buf, size_t len, struct ucxp_welcome *w)
{
	if (len >= 4 && psl_van_get_le32(buf) != WELCOME_MAGIC)
		return -EPROTO;
	if (len < UCXP_WELCOME_SIZE)
		return -EAGAIN;
	w->version = psl_van_get_le16(buf + 4);
	w->status = psl_van_get_le16(buf + 6);
	w->conn = psl_van_get_le32(buf + 8);
	w->nonce = psl_van_get_le32(buf + 12);
	w->ucx_version = psl_van_get_le32(buf + 16);
	w->addr_len = psl_van_get_le32(buf + 20);
	if (w->version != UCXP_PROTO_VERSION || (w->addr_len == 0 && w->status == 0) ||
	    w->addr_len > UCXP_MAX_ADDR)
		return -EPROTO;
	if (len < UCXP_WELCOME_SIZE + (size_t)w->addr_len)
		return -EAGAIN;
	return 0;
}

/* ----------------------------------------------- active message header -- */

void psl__ucxp_am_hdr_encode(const struct ucxp_am_hdr *h, uint8_t out[UCXP_AM_HDR_SIZE])
{
	psl_van_put_le32(out, AM_MAGIC);
	psl_van_put_le32(out + 4, h->conn);
	psl_van_put_le32(out + 8, h->nonce);
	psl_van_put_le16(out + 12, h->part);
	psl_van_put_le16(out + 14, h->nparts);
	psl_van_put_le64(out + 16, h->seq);
	psl_van_put_le32(out + 24, h->nseg);
	psl_van_put_le32(out + 28, h->seg);
}

int psl__ucxp_am_hdr_decode(const void *buf, size_t len, struct ucxp_am_hdr *h)
{
	const uint8_t *p = buf;
	if (!p || len != UCXP_AM_HDR_SIZE || psl_van_get_le32(p) != AM_MAGIC)
		return -EPROTO;
	h->conn = psl_van_get_le32(p + 4);
	h->nonce = psl_van_get_le32(p + 8);
	h->part = psl_van_get_le16(p + 12);
	h->nparts = psl_van_get_le16(p + 14);
	h->seq = psl_van_get_le64(p + 16);
	h->nseg = psl_van_get_le32(p + 24);
	h->seg = psl_van_get_le32(p + 28);
	if (h->nseg > UCXP_MAX_SEG || h->nparts < 1 || h->nparts > h->nseg + 1 ||
	    h->part >= h->nparts || (h->part > 0 && h->seg >= h->nseg))
		return -EPROTO;
	return 0;
}

/* ------------------------------------------------------------ batches -- */

size_t psl__ucxp_batch_put(uint8_t *buf, const void *head, size_t head_len, uint32_t nseg)
{
	psl_van_put_le32(buf, (uint32_t)head_len);
	psl_van_put_le32(buf + 4, nseg);
	if (head_len)
		memcpy(buf + UCXP_BATCH_REC, head, head_len);
	return UCXP_BATCH_REC + head_len;
}

int psl__ucxp_batch_next(const uint8_t *buf, size_t len, size_t *off, const uint8_t **head,
			 size_t *head_len, uint32_t *nseg)
{
	size_t o = *off, hl;
	if (o == len)
		return 0;
	if (o > len || len - o < UCXP_BATCH_REC)
		return -EPROTO;
	hl = psl_van_get_le32(buf + o);
	if (hl % 8 || hl > len - o - UCXP_BATCH_REC || psl_van_get_le32(buf + o + 4) > UCXP_MAX_SEG)
		return -EPROTO;
	*nseg = psl_van_get_le32(buf + o + 4);
	*head = buf + o + UCXP_BATCH_REC;
	*head_len = hl;
	*off = o + UCXP_BATCH_REC + hl;
	return 1;
}

int psl__ucxp_am_lane(const char *info, char *out, size_t out_len)
{
	const char *line = info;

	while (line && *line) {
		const char *end = strchr(line, '\n'), *arrow, *lane, *tl, *p;
		size_t n = end ? (size_t)(end - line) : strlen(line), k;
		char buf[512];

		if (n >= sizeof(buf))
			n = sizeof(buf) - 1;
		memcpy(buf, line, n);
		buf[n] = 0;
		line = end ? end + 1 : NULL;
		lane = strstr(buf, "lane[");
		arrow = lane ? strstr(lane, "->") : NULL;
		if (!arrow)
			continue;
		/* the lane's uses, after the arrow: one of them is "am" alone */
		for (p = arrow + 2; *p;) {
			while (*p == ' ')
				p++;
			for (k = 0; p[k] && p[k] != ' '; k++)
				;
			if (k == 2 && !strncmp(p, "am", 2))
				break;
			p += k;
		}
		if (!*p)
			continue;
		/* "lane[0]:  0:tcp/lo.0 md[0]": the name after "N:", to the '.' */
		tl = strchr(lane, ':');
		tl = tl ? strchr(tl + 1, ':') : NULL;
		if (!tl || tl > arrow)
			continue;
		tl++;
		for (k = 0; tl[k] && tl[k] != '.' && tl[k] != ' ' && &tl[k] < arrow; k++)
			;
		if (!k || !memchr(tl, '/', k) || k >= out_len)
			continue;
		memcpy(out, tl, k);
		out[k] = 0;
		return 0;
	}
	return -ENOENT;
}

/* ----------------------------------------------------- the head part -- */

size_t psl__ucxp_head_size(size_t meta_len, const struct ucxp_seg_desc *segs, uint32_t nseg)
{
	size_t n = 8 + 16 * (size_t)nseg + ucxp_pad8(meta_len);
	uint32_t i;
	for (i = 0; i < nseg; i++)
		if (segs[i].flags & UCXP_SEG_INLINE)
			n += ucxp_pad8((size_t)segs[i].len);
	return n;
}

size_t psl__ucxp_head_write(uint8_t *buf, const void *meta, size_t meta_len,
			    const struct ucxp_seg_desc *segs, uint32_t nseg)
{
	size_t off = 8;
	uint32_t i;
	psl_van_put_le32(buf, (uint32_t)meta_len);
	psl_van_put_le32(buf + 4, nseg);
	for (i = 0; i < nseg; i++) {
		psl_van_put_le64(buf + off, segs[i].len);
		psl_van_put_le32(buf + off + 8, segs[i].flags);
		psl_van_put_le32(buf + off + 12, 0);
		off += 16;
	}
	if (meta_len)
		memcpy(buf + off, meta, meta_len);
	memset(buf + off + meta_len, 0, ucxp_pad8(meta_len) - meta_len);
	return off + ucxp_pad8(meta_len);
}

int psl__ucxp_head_parse(const uint8_t *buf, size_t len, uint32_t nseg,
			 struct ucxp_seg_desc *segs, size_t *meta_off, size_t *meta_len,
			 size_t *inline_off, char *why, size_t why_len)
{
	size_t off, mlen, end;
	uint32_t i, n;

	if (len < 8) {
		snprintf(why, why_len, "head of %zu bytes", len);
		return -EPROTO;
	}
	mlen = psl_van_get_le32(buf);
	n = psl_van_get_le32(buf + 4);
	if (n != nseg || n > UCXP_MAX_SEG) {
		snprintf(why, why_len, "head says %u segments, header %u", n, nseg);
		return -EPROTO;
	}
	if (mlen > UCXP_MAX_META) {
		snprintf(why, why_len, "meta of %zu bytes", mlen);
		return -EPROTO;
	}
	off = 8 + 16 * (size_t)n;
	if (len < off || len - off < ucxp_pad8(mlen)) {
		snprintf(why, why_len, "head of %zu bytes is shorter than its table and meta",
			 len);
		return -EPROTO;
	}
	*meta_off = off;
	*meta_len = mlen;
	end = off + ucxp_pad8(mlen);
	for (i = 0; i < n; i++) {
		const uint8_t *e = buf + 8 + 16 * (size_t)i;
		segs[i].len = psl_van_get_le64(e);
		segs[i].flags = psl_van_get_le32(e + 8);
		if (segs[i].flags & ~UCXP_SEG_INLINE) {
			snprintf(why, why_len, "segment %u has unknown flags 0x%x", i,
				 segs[i].flags);
			return -EPROTO;
		}
		inline_off[i] = 0;
		if (segs[i].flags & UCXP_SEG_INLINE) {
			if (segs[i].len > len - end || ucxp_pad8((size_t)segs[i].len) > len - end) {
				snprintf(why, why_len,
					 "inline segment %u of %llu bytes overruns the head", i,
					 (unsigned long long)segs[i].len);
				return -EPROTO;
			}
			inline_off[i] = end;
			end += ucxp_pad8((size_t)segs[i].len);
		}
	}
	if (end != len) {
		snprintf(why, why_len, "head of %zu bytes, %zu expected", len, end);
		return -EPROTO;
	}
	return 0;
}

/* ---------------------------------------------------- memory, devices -- */

unsigned psl__ucxp_mem_caps(uint64_t ucp_memory_types, uint64_t cuda_bits)
{
	unsigned caps = UCXP_MEM_HOST; /* UCP always carries host memory */
	if (cuda_bits && (ucp_memory_types & cuda_bits))
		caps |= UCXP_MEM_CUDA;
	return caps;
}

int psl__ucxp_mem_check(int32_t mem_type, int32_t dev_id, unsigned mem_caps, char *why,
			size_t why_len)
{
	switch (mem_type) {
	case PSL_MEM_HOST:
		return 0;
	case PSL_MEM_CUDA:
		if (dev_id < 0) {
			snprintf(why, why_len,
				 "a CUDA segment needs its device id (dev_id=%d): set "
				 "psl_van_seg.dev_id to the GPU's ordinal",
				 (int)dev_id);
			return -EINVAL;
		}
		if (!(mem_caps & UCXP_MEM_CUDA)) {
			snprintf(why, why_len,
				 "cannot send CUDA memory of device %d: the UCX library found at "
				 "run time has no CUDA support (ucx_info -d lists no cuda "
				 "transport): install a UCX built with CUDA, or copy the data to "
				 "host memory",
				 (int)dev_id);
			return -ENOTSUP;
		}
		return 0;
	default:
		snprintf(why, why_len,
			 "unknown memory type %d: expected PSL_MEM_HOST (0) or PSL_MEM_CUDA (1)",
			 (int)mem_type);
		return -EINVAL;
	}
}

static unsigned tl_class(const char *tl)
{
	static const struct {
		const char *prefix;
		unsigned cls;
	} map[] = {
		{"posix", UCXP_TL_SHM},	  {"sysv", UCXP_TL_SHM},    {"xpmem", UCXP_TL_SHM},
		{"knem", UCXP_TL_SHM},	  {"cma", UCXP_TL_SHM},	    {"tcp", UCXP_TL_TCP},
		{"rc", UCXP_TL_RDMA},	  {"dc", UCXP_TL_RDMA},	    {"ud", UCXP_TL_RDMA},
		{"cuda", UCXP_TL_CUDA},	  {"gdr", UCXP_TL_CUDA},    {"rocm", UCXP_TL_ROCM},
	};
	size_t i;
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strncmp(tl, map[i].prefix, strlen(map[i].prefix)))
			return map[i].cls;
	return 0;
}

unsigned psl__ucxp_resources(const char *info, char *out, size_t out_len)
{
	const char *line = info;
	size_t off = 0;
	unsigned found = 0;

	if (out_len)
		out[0] = 0;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);
		char buf[256], *tok, *last = NULL, *save = NULL;

		if (n >= sizeof(buf))
			n = sizeof(buf) - 1;
		memcpy(buf, line, n);
		buf[n] = 0;
		line = nl ? nl + 1 : NULL;
		if (!strstr(buf, "resource") || !strstr(buf, "--"))
			continue;
		for (tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
			last = tok;
		if (!last || !strchr(last, '/'))
			continue;
		found |= tl_class(last);
		if (out_len && off + strlen(last) + 2 < out_len) {
			int k = snprintf(out + off, out_len - off, "%s%s", off ? " " : "", last);
			if (k > 0)
				off += (size_t)k;
		}
	}
	return found;
}

/* How many entries of the UCX_TLS list tls are among names[] (n of them);
 * *others gets how many are not. */
static int tls_count(const char *tls, const char *const *names, size_t n, int *others)
{
	const char *p = tls;
	int found = 0;
	*others = 0;
	while (*p) {
		size_t len = strcspn(p, ","), i;
		bool hit = false;
		for (i = 0; i < n && !hit; i++)
			hit = len == strlen(names[i]) && !strncmp(p, names[i], len);
		found += hit;
		*others += !hit && len > 0;
		p += len;
		if (*p == ',')
			p++;
	}
	return found;
}

int psl__ucxp_tls_has_mm(const char *tls)
{
	static const char *const mm[] = {"all", "sm", "shm", "mm", "posix", "sysv", "xpmem"};
	int others;
	if (!tls || !*tls || *tls == '^') /* unset, or "all but ..." */
		return 1;
	return tls_count(tls, mm, sizeof(mm) / sizeof(mm[0]), &others) > 0;
}

int psl__ucxp_rndv_put(const char *tls, bool rdma_or_gpu)
{
	static const char *const all[] = {"all"};
	static const char *const cma[] = {"sm", "shm", "cma"};
	static const char *const ok[] = {"sm",	 "shm",	 "cma",	 "mm",	 "posix", "sysv",
					 "xpmem", "knem", "self", "tcp"};
	int others;
	if (!tls || !*tls || *tls == '^' || tls_count(tls, all, 1, &others))
		return !rdma_or_gpu; /* whatever UCX finds here */
	if (!tls_count(tls, cma, sizeof(cma) / sizeof(cma[0]), &others))
		return 0;
	tls_count(tls, ok, sizeof(ok) / sizeof(ok[0]), &others);
	return others == 0;
}
