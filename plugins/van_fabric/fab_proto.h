/*
 * van_fabric wire formats and the small pieces of logic that do not touch
 * libfabric or sockets (so that tests/unit can check them alone): tags,
 * the message header, the bootstrap hello, per-stream ordering and
 * FI_PROVIDER matching.
 *
 * A message is one header (tag FAB_KIND_HDR) plus zero or more parts sent on
 * their own (tag FAB_KIND_DATA). Part 0 is the meta, parts 1..n the data
 * segments; a part travels inline in the header when it fits, otherwise as its
 * own tagged message, straight from (and into) the user's memory.
 */
#ifndef PSL_VAN_FABRIC_PROTO_H
#define PSL_VAN_FABRIC_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ tags -- */
/* bits 63..62 kind, 61..40 stream id, 39..8 sequence number, 7..0 part */
#define FAB_KIND_HDR 1u
#define FAB_KIND_DATA 2u
#define FAB_STREAM_BITS 22
#define FAB_STREAM_MAX ((1u << FAB_STREAM_BITS) - 1)
#define FAB_MAX_PARTS 64 /* meta + 63 segments */

static inline uint64_t fab_tag(unsigned kind, uint32_t stream, uint32_t seq, unsigned part)
{
	return ((uint64_t)(kind & 3u) << 62) | ((uint64_t)(stream & FAB_STREAM_MAX) << 40) |
	       ((uint64_t)seq << 8) | (uint64_t)(part & 0xffu);
}
static inline unsigned fab_tag_kind(uint64_t t)
{
	return (unsigned)(t >> 62);
}
static inline uint32_t fab_tag_stream(uint64_t t)
{
	return (uint32_t)(t >> 40) & FAB_STREAM_MAX;
}
static inline uint32_t fab_tag_seq(uint64_t t)
{
	return (uint32_t)(t >> 8);
}
static inline unsigned fab_tag_part(uint64_t t)
{
	return (unsigned)(t & 0xffu);
}
/* every header, whatever its stream and sequence number */
#define FAB_HDR_TAG ((uint64_t)FAB_KIND_HDR << 62)
#define FAB_HDR_IGNORE ((((uint64_t)1) << 62) - 1)

/* ---------------------------------------------------------------- header -- */
#define FAB_HDR_MAGIC 0x46534c50u /* "PLSF" little-endian */
#define FAB_PART_INLINE (1ull << 63)

/* What travels first: 16 bytes, then nparts descriptors (8 bytes each:
 * length, with FAB_PART_INLINE set for inline parts), then the inline parts,
 * each starting at an 8-byte boundary. Integers are little-endian. */
struct fab_hdr_view {
	uint32_t seq;
	uint32_t nparts; /* 1 + number of data segments */
	uint64_t len[FAB_MAX_PARTS];
	bool inl[FAB_MAX_PARTS];
	size_t off[FAB_MAX_PARTS]; /* offset of an inline part in the buffer */
};

size_t fab_hdr_fixed_size(uint32_t nparts);
/* Size of the header with the given parts inline (lens[i], inl[i]). */
size_t fab_hdr_size(uint32_t nparts, const uint64_t *lens, const bool *inl);
/* Writes the fixed part and fills v->off for inline parts (the caller copies
 * them). Returns the total size. */
size_t fab_hdr_write(void *buf, uint32_t seq, uint32_t nparts, const uint64_t *lens,
		     const bool *inl, size_t *off);
/* Parses and bounds-checks a received header of n bytes. 0 or -EPROTO, with
 * why[] saying what was wrong. */
int fab_hdr_parse(const void *buf, size_t n, struct fab_hdr_view *v, char *why, size_t whylen);

/* --------------------------------------------------------- bootstrap hello -- */
#define FAB_HELLO_MAGIC 0x4f4c4548u /* "HELO" */
#define FAB_HELLO_VERSION 1
enum fab_hello_kind {
	FAB_HELLO = 1,	 /* connector -> acceptor: who I am, my endpoint */
	FAB_ACCEPT = 2,	 /* acceptor -> connector: your stream id, my endpoint */
	FAB_REFUSE = 3,	 /* acceptor -> connector: cannot talk, text says why */
	FAB_BYE = 4,	 /* connector -> acceptor: last sequence number sent */
};
#define FAB_ADDR_MAX 64
#define FAB_TEXT_MAX 160

struct fab_hello {
	uint32_t kind;
	int32_t node_id;   /* HELLO: the connector's node id */
	uint32_t stream;   /* ACCEPT: the stream id for the connector's tags */
	uint32_t seq;	   /* BYE: number of messages sent on the stream */
	uint32_t hdr_max;  /* largest header the sender of this hello receives */
	uint32_t addr_len; /* endpoint name from fi_getname */
	uint8_t addr[FAB_ADDR_MAX];
	char prov[48]; /* libfabric provider name, NUL-terminated */
	char text[FAB_TEXT_MAX];
};
#define FAB_HELLO_WIRE 296 /* bytes on the wire */
/* With a job secret (PS_JOB_SECRET) a HELLO proves it: its text starts with
 * FAB_HELLO_PROOF, then the proof record (pslite/van_util.h, van name
 * "fabric"). The acceptor answers ACCEPT, with its endpoint and the stream
 * id, only to a hello whose proof holds and whose nonce is new; anything
 * else gets a REFUSE naming PS_JOB_SECRET. Without a secret the text of a
 * HELLO stays empty. */
#define FAB_HELLO_PROOF 'P'

void fab_hello_pack(const struct fab_hello *h, uint8_t out[FAB_HELLO_WIRE]);
int fab_hello_unpack(const uint8_t in[FAB_HELLO_WIRE], struct fab_hello *h);

/* ---------------------------------------------------------- stream order -- */
/* Messages of one stream, kept in sequence order until they can be handed
 * over: a message is delivered when it is complete and every earlier one was
 * delivered. Entries are embedded in the caller's messages. */
struct fab_oq_ent {
	uint32_t seq;
	bool complete;
	struct fab_oq_ent *next;
};
struct fab_oq {
	uint32_t next; /* sequence number to deliver next */
	struct fab_oq_ent *head;
	uint32_t count;
};
/* Adds e (e->seq set). -EEXIST for a duplicate or an already delivered
 * number, -ERANGE when it is more than window ahead. */
int fab_oq_add(struct fab_oq *q, struct fab_oq_ent *e, uint32_t window);
/* The next entry that may be delivered, removed from the queue, or NULL. */
struct fab_oq_ent *fab_oq_pop(struct fab_oq *q);

/* --------------------------------------------------------- FI_PROVIDER -- */
/* Does provider name prov ("tcp;ofi_rxm") pass the FI_PROVIDER-style filter
 * ("tcp", "efa,tcp", "^sockets")? An empty or NULL filter passes all. */
bool fab_prov_match(const char *filter, const char *prov);

#endif
