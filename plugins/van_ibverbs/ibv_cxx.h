/*
 * The records of C++ ps-lite's RDMA van (bytedance/ps-lite, byteps branch,
 * src/rdma_*.h) and its rules for the meta, as van_ibverbs needs them to
 * recognise a C++ peer and speak its protocol on that connection
 * (ibv_cxxio.c; docs/van-ibverbs.md, "C++ ps-lite's RDMA van"). C++ writes
 * these as native structs; every C++ ps-lite build that matters is x86-64 or
 * aarch64, little-endian, with 8-byte u64 alignment, so the offsets below are
 * fixed. Decoders check lengths and ranges and never trust a field
 * (tests/test_ibv_wire.c).
 *
 * rdmacm private data of a connect request and of its accept (the same record
 * both ways; rdmacm pads it to 56 bytes on a request):
 *   u32 node id, u16 listening port, char host[16] (NUL-terminated),
 *   2 bytes padding                                               (24 bytes)
 * Sent with SEND_WITH_IMM into the peer's receive buffers:
 *   START   immediate 0: u64 meta length, u64 segment count (at most 4),
 *           u64 length of each of 4 segments, u64 the sender's cookie
 *                                                                 (56 bytes)
 *   REPLY   immediate 1: u64 buffer address, u64 the cookie of the START,
 *           u32 remote key, u32 index in the receiver's address pool
 *                                                                 (24 bytes)
 * Then RDMA WRITE_WITH_IMM of the meta to the buffer's address, immediate =
 * the pool index; a push request's values go first, by a plain RDMA WRITE, to
 * the buffer's address + the meta length rounded up to 4096.
 */
#ifndef PSL_VAN_IBV_CXX_H
#define PSL_VAN_IBV_CXX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IBV_CXX_REQ_LEN 24
#define IBV_CXX_HOST_LEN 16
#define IBV_CXX_START_LEN 56
#define IBV_CXX_REPLY_LEN 24
#define IBV_CXX_IMM_START 0u
#define IBV_CXX_IMM_REPLY 1u
#define IBV_CXX_MAX_SEGS 4
#define IBV_CXX_PAGE 4096u
/* C++'s receive buffers hold the larger of START and REPLY */
#define IBV_CXX_RECV_BUF IBV_CXX_START_LEN
/* BYTEPS_ADDRESS_POOL_SIZE's default: pool indices are below it */
#define IBV_CXX_POOL_DEFAULT 10240u
/* the largest meta we accept from a START (C++ metas are a few hundred bytes) */
#define IBV_CXX_MAX_META (1u << 20)

struct ibv_cxx_conn {
	uint32_t node;
	uint16_t port;
	char host[IBV_CXX_HOST_LEN + 1];
};

struct ibv_cxx_start {
	uint64_t meta_len;
	uint64_t nseg;
	uint64_t len[IBV_CXX_MAX_SEGS];
	uint64_t cookie;
};

struct ibv_cxx_reply {
	uint64_t addr;
	uint64_t cookie;
	uint32_t rkey;
	uint32_t idx;
};

/* Encoders write the record's length into buf and return it. Decoders return
 * 0, or -EPROTO with why (not such a record, or malformed). */
size_t ibv_cxx_conn_encode(void *buf, const struct ibv_cxx_conn *c);
/* 0 when the private data is a C++ ps-lite connection record: not ours (no
 * "PSIB"), a node id in 1..INT32_MAX, a printable NUL-terminated host. */
int ibv_cxx_conn_decode(const void *buf, size_t len, struct ibv_cxx_conn *c, const char **why);
size_t ibv_cxx_start_encode(void *buf, const struct ibv_cxx_start *s);
int ibv_cxx_start_decode(const void *buf, size_t len, struct ibv_cxx_start *s, const char **why);
size_t ibv_cxx_reply_encode(void *buf, const struct ibv_cxx_reply *r);
/* pool: the receiver's address pool size (0: IBV_CXX_POOL_DEFAULT) */
int ibv_cxx_reply_decode(const void *buf, size_t len, uint32_t pool, struct ibv_cxx_reply *r,
			 const char **why);
/* Where a push request's values start in the receiver's buffer. */
uint64_t ibv_cxx_data_offset(uint64_t meta_len);
/* The bytes a receiver's buffer needs for a START: meta, padding to a page,
 * every segment (0 when that overflows). */
uint64_t ibv_cxx_buf_len(const struct ibv_cxx_start *s);

/*
 * The meta (ps-lite's packed meta, docs/wire.md §4) is the same bytes on C++'s
 * RDMA van as on ZeroMQ; what differs is which data travels. C++ reads a
 * message's kind from the meta: a control or SimpleApp message carries the
 * meta alone; a KV message carries one key, in the meta's key field, and its
 * values as val_len bytes (see ibv_cxx_plan and ibv_cxx_unpack).
 */
enum ibv_cxx_kind {
	IBV_CXX_OTHER = 0, /* control or SimpleApp */
	IBV_CXX_PUSH_REQ,
	IBV_CXX_PULL_REQ,
	IBV_CXX_PUSH_RESP,
	IBV_CXX_PULL_RESP,
};

struct ibv_cxx_meta {
	int kind;
	uint64_t key, addr;
	int32_t val_len, option;
	int32_t vtype; /* data type of the values frame, -1 when not listed */
};

/* Reads what the C++ mode needs of a meta: 0, or -EPROTO with why. */
int ibv_cxx_meta_peek(const void *meta, size_t len, struct ibv_cxx_meta *m, const char **why);
void ibv_cxx_meta_set_key(void *meta, uint64_t key);
void ibv_cxx_meta_set_val_len(void *meta, int32_t n);
void ibv_cxx_meta_set_option(void *meta, int32_t n);

/* How one message goes to a C++ node. */
struct ibv_cxx_plan {
	int kind;		    /* enum ibv_cxx_kind */
	uint64_t key;		    /* KV: the key its remote buffer is kept under */
	struct ibv_cxx_start start; /* what the START announces (cookie aside) */
	uint64_t need;		    /* bytes the receiver's buffer holds for it */
	int data_seg;		    /* segment RDMA-written before the meta, or -1:
				     * push request: into the receiver's buffer after
				     * the meta; pull answer: to the meta's addr with
				     * the meta's option as remote key */
	uint64_t pull_addr, pull_len; /* pull request: where the answer goes */
};

/* Plans a message of this node's core for a C++ node and patches its meta
 * (a copy) as C++'s RDMA van does: a request's key field from its one key,
 * val_len of a push or pull answer as the values' bytes. Refuses with
 * -EPROTO and why what C++ cannot carry: several keys, values wider than a
 * byte, a pull without room for its answer. The pull request's option (the
 * remote key of pull_addr) is the caller's to set. */
int ibv_cxx_plan(void *meta, size_t meta_len, const uint64_t *lens, const void *keys,
		 uint32_t nseg, struct ibv_cxx_plan *p, const char **why);

/* What a message from a C++ node holds, rebuilt from its meta. */
struct ibv_cxx_in {
	int kind;
	uint32_t nseg; /* segments to deliver: 0, 2 (keys, no values), 3 (keys, values, lens) */
	uint64_t key;
	int32_t val_len;
	uint64_t vals_off;  /* push request: values at this offset of the buffer */
	uint64_t vals_addr; /* pull answer: values already written here */
};

/* buf_len: the bytes of the buffer the meta arrived in (its START's). */
int ibv_cxx_unpack(const void *meta, size_t meta_len, uint64_t buf_len, struct ibv_cxx_in *in,
		   const char **why);

#endif
