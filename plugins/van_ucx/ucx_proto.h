/*
 * van_ucx: what goes over the wire, and the decisions that need no UCX
 * runtime (so that plugins/van_ucx/tests/test_van_ucx_proto.c can check them on any
 * machine): the bootstrap greeting and hello/welcome records, the header
 * of every active message, the layout of a message's head part, which
 * memory types can be sent, and the summary of UCX's resources.
 *
 * Bootstrap (TCP, on the port bind() returned):
 *   acceptor -> connector  "PSLVAN1 ucx\n"                      (at accept)
 *   connector -> acceptor  "PSLVAN1 ucx\n" + hello (16 bytes)
 *                          [+ proof (32 bytes) when the hello's flags say so]
 *   acceptor -> connector  welcome (24 bytes) + UCX worker address
 *                          (a refusal: a welcome with a status, no address)
 * With a job secret (PS_JOB_SECRET) the connector proves it in the hello
 * (pslite/van_util.h's proof record, van name "ucx"), and the acceptor
 * answers only a hello whose proof holds and whose nonce is new: nobody
 * without the secret learns the node's UCX address or the connection's
 * (conn, nonce) that every active message must carry.
 * Then the connector creates a UCP endpoint to that worker address and sends
 * active messages whose header names the acceptor's connection (conn,
 * nonce). The TCP connection stays open: its end tells that the peer is
 * gone, whatever transport UCX uses.
 *
 * All integers on the wire are little-endian.
 */
#ifndef PSL_VAN_UCX_PROTO_H
#define PSL_VAN_UCX_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UCXP_VAN_NAME "ucx"
#define UCXP_PROTO_VERSION 2 /* 2: batches, joined parts */
#define UCXP_MAX_SEG 64			    /* data segments of one message */
#define UCXP_MAX_PARTS (UCXP_MAX_SEG + 1)   /* active messages of one message */
#define UCXP_MAX_META (16u << 20)	    /* largest meta blob */
#define UCXP_MAX_ADDR (64u << 10)	    /* largest UCX worker address */
#define UCXP_SEQ_WINDOW (1u << 20)	    /* messages a sender may be ahead */

/* ------------------------------------------------------------ greeting -- */

enum ucxp_peer_kind {
	UCXP_PEER_NEED_MORE = 0, /* not enough bytes yet to tell */
	UCXP_PEER_UCX = 1,	 /* "PSLVAN1 ucx\n": the same van */
	UCXP_PEER_OTHER_VAN = 2, /* "PSLVAN1 <name>\n" with another name */
	UCXP_PEER_ZMTP = 3,	 /* ZeroMQ's signature: van zmq or C++ ps-lite */
	UCXP_PEER_UNKNOWN = 4,	 /* anything else */
};

/* Our greeting, as sent. */
size_t psl__ucxp_greeting(char *buf, size_t len);

/* Classifies the first bytes a peer sent. For UCXP_PEER_UCX, *used is the
 * greeting's length; for UCXP_PEER_OTHER_VAN, other gets the van's name. */
int psl__ucxp_classify(const uint8_t *buf, size_t len, size_t *used, char *other,
		       size_t other_len);

/* Human-readable name of what a peer of kind k (other: its van) runs. */
const char *psl__ucxp_peer_desc(int kind, const char *other, char *buf, size_t len);

/* ------------------------------------------------------ hello, welcome -- */

#define UCXP_HELLO_SIZE 16
#define UCXP_WELCOME_SIZE 24
#define UCXP_HELLO_F_PROOF 1u /* a proof record follows the hello */

/* welcome.status */
enum ucxp_welcome_status {
	UCXP_WELCOME_OK = 0,
	UCXP_WELCOME_BAD_PROOF = 1, /* the acceptor has a secret; the hello proves none */
	UCXP_WELCOME_NO_SECRET = 2, /* the hello proves a secret the acceptor has not */
};

struct ucxp_hello {
	uint16_t version;
	uint16_t flags;
	int32_t node_id;      /* the connector's id, PSL_VAN_ID_NONE if none */
	uint32_t ucx_version; /* UCP_VERSION(major, minor) of the connector */
};

struct ucxp_welcome {
	uint16_t version;
	uint16_t status; /* 0 = accepted */
	uint32_t conn;	 /* the acceptor's connection index ... */
	uint32_t nonce;	 /* ... and nonce: both go in every AM header */
	uint32_t ucx_version;
	uint32_t addr_len; /* bytes of UCX worker address that follow */
};

void psl__ucxp_hello_encode(const struct ucxp_hello *h, uint8_t out[UCXP_HELLO_SIZE]);
/* 0, -EAGAIN (need more bytes), or -EPROTO. */
int psl__ucxp_hello_decode(const uint8_t *buf, size_t len, struct ucxp_hello *h);
void psl__ucxp_welcome_encode(const struct ucxp_welcome *w, uint8_t out[UCXP_WELCOME_SIZE]);
/* 0 when the welcome and its whole address are in buf, -EAGAIN, -EPROTO. */
int psl__ucxp_welcome_decode(const uint8_t *buf, size_t len, struct ucxp_welcome *w);

/* ----------------------------------------------- active message header -- */

#define UCXP_AM_HDR_SIZE 32

struct ucxp_am_hdr {
	uint32_t conn;	 /* receiver's connection index */
	uint32_t nonce;	 /* receiver's connection nonce */
	uint64_t seq;	 /* message number on this connection, from 0 */
	uint16_t part;	 /* 0: head (meta, segment table, small segments);
			    k > 0: the data of segment part_seg[k] alone */
	uint16_t nparts; /* active messages of this message, head included */
	uint32_t nseg;	 /* data segments of this message */
	uint32_t seg;	 /* for part > 0: which segment it carries */
};

void psl__ucxp_am_hdr_encode(const struct ucxp_am_hdr *h, uint8_t out[UCXP_AM_HDR_SIZE]);
/* 0 or -EPROTO (wrong length or magic, inconsistent counts). */
int psl__ucxp_am_hdr_decode(const void *buf, size_t len, struct ucxp_am_hdr *h);

/* ----------------------------------------------------- the head part -- */

/*
 * Payload of part 0:
 *   u32 meta_len, u32 nseg,
 *   nseg x { u64 len, u32 flags (UCXP_SEG_INLINE), u32 0 },
 *   meta, padding to 8,
 *   the data of every inline segment, each padded to 8.
 * Segments not inline travel alone in parts 1..n, in segment order.
 */
#define UCXP_SEG_INLINE 1u

struct ucxp_seg_desc {
	uint64_t len;
	uint32_t flags;
};

static inline size_t ucxp_pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Bytes of the head payload for these segments. */
size_t psl__ucxp_head_size(size_t meta_len, const struct ucxp_seg_desc *segs, uint32_t nseg);

/* Writes the preamble, table and meta; returns the offset where inline data
 * starts (each inline segment then goes at the next 8-aligned offset). */
size_t psl__ucxp_head_write(uint8_t *buf, const void *meta, size_t meta_len,
			    const struct ucxp_seg_desc *segs, uint32_t nseg);

/* Parses a head payload of len bytes that says it has nseg segments:
 * fills segs[nseg], *meta_off, *meta_len, and inline_off[i] for inline
 * segments. 0 or -EPROTO with why filled. */
int psl__ucxp_head_parse(const uint8_t *buf, size_t len, uint32_t nseg,
			 struct ucxp_seg_desc *segs, size_t *meta_off, size_t *meta_len,
			 size_t *inline_off, char *why, size_t why_len);

/* ------------------------------------------------------- joined parts -- */

/*
 * A message whose head part is small and that has one part of data (a push,
 * a pull answer) may travel as one active message of its own id: its header
 * is the data part's header (part 1 of 2) followed by the head part's
 * payload, and its data is the segment's data, so that UCX moves both in
 * one go (over rendezvous, the head rides in the request to send).
 */

/* ------------------------------------------------------------ batches -- */

/*
 * A batch: several whole messages of one part each, consecutive on one
 * connection, in one active message of their own id, so that a round of
 * answers to one peer costs one send (one system call over TCP, one wake-up
 * of the peer) instead of one each. Its header is a message's header with
 * seq = the first message's number, part 0, nparts 1, nseg = how many
 * messages (2 to UCXP_MAX_SEG); its payload, for each message in order:
 *   u32 head_len, u32 nseg, the message's head part (head_len bytes, a
 *   multiple of 8).
 */
#define UCXP_BATCH_REC 8 /* bytes before each head */

/* Writes one record at buf; returns its size (UCXP_BATCH_REC + head_len). */
size_t psl__ucxp_batch_put(uint8_t *buf, const void *head, size_t head_len, uint32_t nseg);

/* The record at *off of a batch payload of len bytes: 1 with head,
 * head_len and nseg filled and *off moved past it; 0 at the end; -EPROTO
 * when the record does not fit, its head is not a multiple of 8 or it has
 * more than UCXP_MAX_SEG segments. */
int psl__ucxp_batch_next(const uint8_t *buf, size_t len, size_t *off, const uint8_t **head,
			 size_t *head_len, uint32_t *nseg);

/* From ucp_ep_print_info's text: the transport and device of the lane
 * that carries the endpoint's active messages ("tcp/lo", "sysv/memory")
 * into out; 0, or -ENOENT when no such lane is listed (another UCX's
 * format). Batches and joined parts pay off where each send is a system
 * call and a wake-up of the peer: over tcp (measured), not over shared
 * memory (measured); RDMA, not measurable here, keeps one active message
 * per part. */
int psl__ucxp_am_lane(const char *info, char *out, size_t out_len);

/* ---------------------------------------------------- memory, devices -- */

/* What the UCX found at run time can carry (from ucp_context_query's
 * memory_types). */
#define UCXP_MEM_HOST (1u << 0)
#define UCXP_MEM_CUDA (1u << 1)

/* Maps UCP's memory_types bit mask (bit i = ucs_memory_type_t i) to
 * UCXP_MEM_*. cuda_bits: the bit(s) that mean CUDA memory. */
unsigned psl__ucxp_mem_caps(uint64_t ucp_memory_types, uint64_t cuda_bits);

/* Can a segment of this memory type and device be sent? 0, or -EINVAL (bad
 * type or device id) or -ENOTSUP (this UCX cannot carry it), with why. */
int psl__ucxp_mem_check(int32_t mem_type, int32_t dev_id, unsigned mem_caps, char *why,
			size_t why_len);

/* Resource classes found in UCX's resource list. */
#define UCXP_TL_SHM (1u << 0)  /* posix, sysv, xpmem, knem, cma */
#define UCXP_TL_TCP (1u << 1)
#define UCXP_TL_RDMA (1u << 2) /* rc, dc, ud (verbs, mlx5) */
#define UCXP_TL_CUDA (1u << 3) /* cuda_copy, cuda_ipc, gdr_copy */
#define UCXP_TL_ROCM (1u << 4)

/* Summarises the "resource N : md M dev D flags -- tl/dev" lines of
 * ucp_context_print_info's text into out ("tcp/lo tcp/eth0 posix/memory"),
 * and returns UCXP_TL_* of what was found. */
unsigned psl__ucxp_resources(const char *info, char *out, size_t out_len);

/* Whether a UCX_TLS value (NULL: unset) lets UCX use its memory-mapped
 * shared-memory transports (posix, sysv, xpmem: the "mm" FIFO). */
int psl__ucxp_tls_has_mm(const char *tls);
/* Whether to ask UCX for put-based rendezvous (UCX_RNDV_SCHEME=put_zcopy)
 * when the user did not choose: where the large messages UCX can carry
 * between processes go by cross-memory attach (shared memory) or TCP only.
 * Put lets the sender's thread do the copy, instead of the receiver's doing
 * every copy of a push-pull (measured: 1 MiB +60-80%, 8 MiB +35%, 64 KiB +20%
 * over UCX_TLS=posix,sysv,cma,self; TCP about the same). rdma_or_gpu: this
 * machine has an RDMA device or a GPU, where UCX's own choice stays when
 * UCX_TLS allows them. */
int psl__ucxp_rndv_put(const char *tls, bool rdma_or_gpu);

#endif
