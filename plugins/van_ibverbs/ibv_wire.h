/*
 * van_ibverbs wire records: what travels in rdmacm's private data and in the
 * receive buffers of a queue pair. Little-endian, fixed offsets; every decoder
 * checks lengths and ranges and never trusts a field (tests/test_ibv_wire.c).
 *
 * Connection set-up (rdmacm private data, at most 56 bytes on a request):
 *   request  "PSIB" u8 version, u8 qp_index, u8 nqp, u8 flags, i32 sender,
 *            u32 rx_depth, u32 rx_buf, u64 link nonce              (28 bytes)
 *            with flags bit 0 (a job secret, PS_JOB_SECRET): u64 a random
 *            nonce of this request, then 16 bytes of HMAC from the host's
 *            proof() over "pslite-ibverbs|<sender>|<hex of link nonce and
 *            this nonce>" (pslite/van_util.h)                       (52 bytes)
 *   accept   "PSIB" u8 version, u8 qp_index, u8 nqp, u8 0,
 *            u32 rx_depth, u32 rx_buf                              (16 bytes)
 *   reject   "PSIB" u8 version, u8 reason, u16 0                   (8 bytes)
 *            reasons 4 and 5: the acceptor has a job secret and the request
 *            proves another or none; the request proves a secret and the
 *            acceptor has none
 *
 * In a receive buffer (one record per send):
 *   MSG     u8 1, u8 flags, u16 credits, u32 nseg, u64 seq, u32 meta_len,
 *           u32 0, u64 token (0: nothing by rendezvous)           (32 bytes)
 *           then nseg descriptors: u64 len, u64 addr, u32 rkey, u32 flags
 *           (bit 0: the segment stays in the sender's memory and is read by
 *           the receiver with RDMA READ at addr/rkey), then meta, then the
 *           bytes of every segment carried inline, in order.
 *           Record flags bit 0 (IBV_MSG_F_META_RDV): the meta does not fit
 *           in a receive buffer and stays in the sender's memory: one more
 *           descriptor (len = meta_len, bit 0 set) follows the segments'
 *           and no meta bytes are in the record; the receiver reads the
 *           meta first, then the segments (their destinations may depend
 *           on it). Such a record always has a token.
 *   FIN     u8 2, u8 0, u16 credits, i32 status, u64 token         (16 bytes)
 *           the receiver read every rendezvous segment of message token.
 *   CREDIT  u8 3, u8 0, u16 credits, u32 0                         (8 bytes)
 */
#ifndef PSL_VAN_IBV_WIRE_H
#define PSL_VAN_IBV_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pslite/van_util.h>

#define IBV_WIRE_MAGIC "PSIB"
#define IBV_WIRE_VERSION 1
#define IBV_CONN_REQ_LEN 28
#define IBV_CONN_REQ_PROOF_LEN 52 /* with IBV_REQ_F_PROOF */
#define IBV_REQ_F_PROOF 1u
#define IBV_CONN_ACC_LEN 16
#define IBV_CONN_REJ_LEN 8
#define IBV_MSG_HDR_LEN 32
#define IBV_SEG_DESC_LEN 24
#define IBV_FIN_LEN 16
#define IBV_CREDIT_LEN 8
#define IBV_MAX_SEGS 16
#define IBV_MAX_QPS 8
#define IBV_MSG_F_META_RDV 1u
/* The largest meta a record may announce by rendezvous. */
#define IBV_MAX_META_RDV (1u << 30)

enum ibv_rec_type { IBV_REC_MSG = 1, IBV_REC_FIN = 2, IBV_REC_CREDIT = 3 };
enum ibv_rej_reason {
	IBV_REJ_MALFORMED = 1,
	IBV_REJ_VERSION = 2,
	IBV_REJ_RESOURCES = 3,
	IBV_REJ_BAD_PROOF = 4,
	IBV_REJ_NO_SECRET = 5,
};

struct ibv_conn_req {
	uint8_t version, qp_index, nqp, flags;
	int32_t sender;
	uint32_t rx_depth, rx_buf;
	uint64_t nonce;
	/* with IBV_REQ_F_PROOF: the proof's nonce (link nonce, then this
	 * request's) and the first 16 bytes of its MAC */
	uint8_t proof[PSL_VAN_PROOF_LEN];
};

struct ibv_conn_acc {
	uint8_t version, qp_index, nqp;
	uint32_t rx_depth, rx_buf;
};

struct ibv_msg_hdr {
	uint16_t credits;
	uint32_t nseg;
	uint64_t seq;
	uint32_t meta_len;
	uint64_t token;
	/* the meta by rendezvous (IBV_MSG_F_META_RDV): where to read it */
	bool meta_remote;
	uint64_t meta_addr;
	uint32_t meta_rkey;
};

/* One segment as described on the wire (data: the bytes to carry inline when
 * encoding; where they are in the buffer when decoding). */
struct ibv_wseg {
	uint64_t len;
	uint64_t addr;
	uint32_t rkey;
	bool remote;
	const void *data;
};

/* Connection records: encoders return the length written (buf has room for
 * the record's length); decoders return 0 or -EPROTO (not ours, or
 * malformed: why says what), -EPROTONOSUPPORT (another version). */
size_t ibv_conn_req_encode(void *buf, const struct ibv_conn_req *r);
int ibv_conn_req_decode(const void *buf, size_t len, struct ibv_conn_req *r, const char **why);
size_t ibv_conn_acc_encode(void *buf, const struct ibv_conn_acc *a);
int ibv_conn_acc_decode(const void *buf, size_t len, struct ibv_conn_acc *a, const char **why);
size_t ibv_conn_rej_encode(void *buf, int reason);
/* The reason of one of our rejections, or -1 when the data is not ours. */
int ibv_conn_rej_decode(const void *buf, size_t len);

/* The bytes a MSG record takes with its meta inline (0 when it cannot be
 * described: too many segments, sizes overflowing). */
size_t ibv_msg_size(uint32_t nseg, uint32_t meta_len, const struct ibv_wseg *segs);
/* The bytes the MSG record of h takes (its meta inline or by rendezvous). */
size_t ibv_msg_rec_size(const struct ibv_msg_hdr *h, const struct ibv_wseg *segs);
/* Writes a MSG record into buf (cap bytes); returns its length or 0 when it
 * does not fit. */
size_t ibv_msg_encode(void *buf, size_t cap, const struct ibv_msg_hdr *h, const void *meta,
		      const struct ibv_wseg *segs);
/* Decodes the MSG record of len bytes in buf: segs (room for IBV_MAX_SEGS)
 * get their descriptors, inline ones a data pointer into buf; *meta points
 * at the meta (NULL when h->meta_remote). 0, or -EPROTO with why. */
int ibv_msg_decode(const void *buf, size_t len, struct ibv_msg_hdr *h, struct ibv_wseg *segs,
		   const void **meta, const char **why);

size_t ibv_fin_encode(void *buf, uint16_t credits, int32_t status, uint64_t token);
size_t ibv_credit_encode(void *buf, uint16_t credits);
/* The type of any record, with its credits; for FIN also status and token.
 * 0 or -EPROTO (short, unknown type). */
int ibv_rec_peek(const void *buf, size_t len, int *type, uint16_t *credits, int32_t *status,
		 uint64_t *token, const char **why);

#endif
