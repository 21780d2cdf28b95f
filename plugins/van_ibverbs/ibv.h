/* van_ibverbs internals shared by its files. */
#ifndef PSL_VAN_IBV_H
#define PSL_VAN_IBV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <pslite/van.h>
#include <pslite/van_util.h>

#include "ibv_cxx.h"
#include "ibv_logic.h"
#include "ibv_probe.h"
#include "ibv_wire.h"

#define VAN "van_ibverbs"
#define LOG(v, lvl, ...) psl_van_log((v)->host, (lvl), VAN, __VA_ARGS__)

/* Receive buffers of the side that accepts (it receives messages): a record
 * up to this size travels eagerly, larger segments by rendezvous. */
#define IBV_EAGER_BUF (8192 + 512)
/* Receive buffers of the side that connects (it receives FIN and CREDIT). */
#define IBV_CTL_BUF 64
/* Send slots for FIN and CREDIT records on each queue pair. */
#define IBV_CTL_SLOTS 32

/* RDMA READs in flight on one queue pair. */
#define IBV_READ_SLOTS 32

/* Send slots of a link to a C++ ps-lite node: its STARTs and the metas it
 * writes (a larger meta is registered on its own). */
#define IBV_CXX_SLOT 4096

/* What a work request is, found from its wr_id. WR_NOP: a C++-mode RDMA
 * WRITE of values, whose completion only frees its place in the queue. */
enum ibv_wr_kind { WR_RX = 1, WR_TX, WR_CTL, WR_READ, WR_NOP };

struct ibv_wr {
	uint8_t kind;
	uint32_t idx; /* buffer or slot index; WR_READ: the segment */
	void *obj;    /* WR_TX: the send op; WR_READ: the receive op; NULL: gone */
};

struct ibv_link;
struct ibv_stream;
struct ibv_sendop;

/* A queue pair, either end. Everything here is under the van's lock. */
struct ibv_q {
	struct psl_van *van;
	struct rdma_cm_id *cm;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	bool outgoing; /* we connected (we send messages, receive FIN/CREDIT) */
	bool cxx;      /* the peer is a C++ ps-lite RDMA node (ibv_cxxio.c) */
	struct ibv_wr nop_wr;
	struct ibv_cxx_pend *cx_replies; /* REPLY records waiting for a slot */
	int index;
	struct ibv_link *link;	   /* outgoing */
	struct ibv_stream *stream; /* incoming */
	bool up, dead, cq_armed;
	/* receive buffers: depth + IBV_CR_RESERVE of rx_buf bytes */
	uint32_t rx_n, rx_buf;
	uint8_t *rx_mem;
	struct ibv_mr *rx_mr;
	struct ibv_wr *rx_wr;
	/* send slots: tx_n of tx_buf bytes (the peer's receive buffer) */
	uint32_t tx_n, tx_buf, tx_free_n;
	uint8_t *tx_mem;
	struct ibv_mr *tx_mr;
	struct ibv_wr *tx_wr;
	uint32_t *tx_free;
	/* control slots */
	uint8_t ctl_mem[IBV_CTL_SLOTS][32];
	struct ibv_mr *ctl_mr;
	struct ibv_wr ctl_wr[IBV_CTL_SLOTS];
	uint32_t ctl_free[IBV_CTL_SLOTS], ctl_free_n;
	/* flow */
	struct ibv_credits cr;
	uint32_t sq_max, sq_used, max_inline;
	struct ibv_sendop *qhead, *qtail; /* messages waiting for credit or a slot */
	uint32_t queued;
	uint32_t fin_pending;	     /* FIN records waiting for a credit */
	struct ibv_fin_wait *fins;   /* their tokens */
	struct ibv_readop *rq_head, *rq_tail; /* reads waiting for a read slot */
	struct ibv_wr rd_wr[IBV_READ_SLOTS];
	uint32_t rd_free[IBV_READ_SLOTS], rd_free_n;
	uint64_t msgs, bytes;	     /* counters: records sent / received */
	struct ibv_q *next_all;
};

struct ibv_fin_wait {
	uint64_t token;
	int32_t status;
	struct ibv_fin_wait *next;
};

enum link_state { L_CONNECTING = 0, L_UP, L_DOWN, L_CLOSING };

/* A node we send to (connect). */
struct ibv_link {
	int32_t id, my_id;
	char host[128];
	int port;
	char where[160];
	int state;
	bool retired, told;
	struct ibv_sendop *wq_head, *wq_tail; /* sent before the link was up */
	uint64_t nonce, next_seq, next_token;
	int nqp;
	struct ibv_q *q[IBV_MAX_QPS];
	unsigned rr;
	int64_t deadline_ms, retry_at_ms;
	int retry_ms;
	int last_err;
	char last_why[256];
	/* what answers on the peer's TCP port while rdmacm cannot reach it
	 * (ibv_probe.h): one probe per failed attempt, at most one at a time */
	struct ibv_probe probe;
	struct ibv_sendop *live; /* ops not done yet */
	/* C++ mode (ibv_cxxio.c): messages not written yet, in order; the
	 * head may wait for the REPLY to its START */
	bool cxx, cx_warned;
	struct ibv_sendop *cx_head, *cx_tail;
	struct ibv_cxx_tuple *tuples; /* remote buffers kept per (kind, key) */
	size_t ntuples, cap_tuples;
	uint64_t cx_next_cookie;
	struct ibv_link *next;
};

struct ibv_sendop {
	struct ibv_link *link;
	struct ibv_q *q;
	void *cookie;
	struct ibv_sop sm;
	uint64_t token;
	int slot; /* send slot while posted, -1 */
	size_t rec_len;
	uint8_t *rec; /* the encoded record until it is posted */
	uint32_t nreg;
	struct ibv_mrc_ent *reg[IBV_MAX_SEGS + 1]; /* segments, and a meta by rendezvous */
	struct ibv_sendop *qnext;	/* the queue pair's wait queue */
	struct ibv_sendop *lprev, *lnext; /* the link's live list */
	/* a message kept as given until its link is up (raw), and every
	 * message to a C++ node */
	bool raw;
	uint8_t *meta;
	size_t meta_len;
	uint32_t nseg;
	struct psl_van_seg segs[IBV_MAX_SEGS];
	struct ibv_cxx_plan plan;
	uint64_t cx_cookie;
	bool cx_started, cx_have;
	struct ibv_cxx_reply cx_tuple;
	struct ibv_mr *meta_mr;
	struct ibv_sendop *cnext;
};

/* A node that sends to us (accepted queue pairs of one link). */
struct ibv_stream {
	uint64_t nonce;
	int32_t sender;
	int nqp;
	struct ibv_q *q[IBV_MAX_QPS];
	struct ibv_oq oq;
	bool dead, cxx;
	struct ibv_stream *next;
};

/* A buffer the van owns for a segment read by rendezvous (ibv_pool.c). */
struct ibv_pbuf;
struct ibv_pool;

struct ibv_recvop {
	struct psl_van_rmsg pub;
	struct ibv_oq_ent oq;
	struct ibv_stream *stream;
	struct ibv_q *q;
	uint64_t token;
	int reads_left, status;
	uint8_t *block; /* meta and inline segments */
	struct psl_van_rseg segs[IBV_MAX_SEGS];
	struct ibv_pbuf *pb[IBV_MAX_SEGS];
	struct psl_van_dest dest[IBV_MAX_SEGS];
	bool loan[IBV_MAX_SEGS];
	struct ibv_mrc_ent *reg[IBV_MAX_SEGS];
	struct ibv_wr rwr[IBV_MAX_SEGS];
	/* a meta by rendezvous: read into meta_pb first; the segments'
	 * descriptors wait in rws until it is here */
	struct ibv_pbuf *meta_pb;
	void *meta_tmp;
	struct ibv_wseg *rws;
};

/* The read of a meta by rendezvous (the segment index of its ibv_readop). */
#define IBV_META_SEG IBV_MAX_SEGS

struct ibv_readop {
	struct ibv_recvop *op;
	uint32_t seg;
	uint64_t raddr, len;
	uint32_t rkey, lkey;
	void *laddr;
	struct ibv_readop *next;
};

/* A completion to report once the lock is dropped. */
struct ibv_event {
	int kind; /* 1 send_done, 2 deliver, 3 peer event, 4 loan put */
	void *cookie;
	int status;
	struct psl_van_rmsg *msg;
	int32_t id;
	int pev;
	char detail[512];
	struct ibv_event *next;
};

struct psl_van {
	const struct psl_van_host *host;
	bool secret;		     /* PS_JOB_SECRET: connection requests carry proofs */
	struct psl_van_nonces nonces; /* of the proofs taken (the cm thread's) */
	/* C++ ps-lite peers already reported (hashes of their records; the cm
	 * thread's): they retry every 500 ms, one ERROR line each is enough */
	uint64_t cxx_seen[16];
	/* settings */
	long rx_depth, start_depth, nports, split_qp, connect_s, mr_cache_max, rndv_min;
	bool busy_poll, mr_cache_on;
	int64_t spin_ns;
	/* device */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *comp;
	struct ibv_mrc mrc;
	bool mrc_ready;
	int pagemap_fd;
	struct ibv_pool *pool;
	char bind_host[128];
	int port;
	bool bound;
	/* state */
	pthread_mutex_t mu;
	/* held by whoever polls the queues and runs the callbacks: the
	 * progress thread, or a caller by trylock (ibv_progress.c) */
	pthread_mutex_t rx_mu;
	_Atomic int64_t driven_until; /* ns: callers poll until about then */
	pthread_t thread;
	bool thread_on;
	atomic_bool stop;
	int wake_fd;
	struct ibv_link *links;
	struct ibv_stream *streams;
	struct ibv_q *qs;
	struct ibv_event *ev_head, *ev_tail;
	char transports[256];
	/* C++ mode (ibv_cxxio.c): buffers lent to C++ senders by pool index,
	 * pull answers expected, C++ nodes met (host:port) */
	long cx_pool_max;
	int role; /* from bind: 0 server, 1 worker, 2 scheduler */
	struct ibv_cxx_rbuf **cx_rb;
	uint32_t cx_rb_n, cx_rb_hint;
	struct ibv_cxx_rbuf *cx_small; /* registered small buffers, free */
	struct ibv_cxx_pull *cx_pulls;
	char cx_known[16][160];
	int32_t last_my_id;
};

/* ibv_dev.c */
int ibv_dev_check(struct psl_van *v);
void ibv_dev_describe(struct psl_van *v, char *buf, size_t cap);
int ibv_dev_memlock_check(struct psl_van *v);
int ibv_dev_attach(struct psl_van *v, struct ibv_context *ctx);
const char *ibv_dev_reg_hint(int err);
int ibv_mrc_reg_cb(void *ctx, void *addr, size_t len, void **mr);
bool ibv_mrc_stamp_cb(void *ctx, uintptr_t start, uintptr_t end, uint64_t *stamp);
void ibv_dev_pagemap_open(struct psl_van *v);
uint32_t ibv_dev_local_ipv4(void);
void ibv_mrc_dereg_cb(void *ctx, void *mr);

/* ibv_conn.c */
int ibv_listen(struct psl_van *v, const char *host, int port, int *bound);
int ibv_link_start(struct psl_van *v, struct ibv_link *l);
void ibv_cm_event(struct psl_van *v);
int ibv_conn_timers(struct psl_van *v, int64_t now);
void ibv_link_down(struct psl_van *v, struct ibv_link *l, int err, const char *detail);
void ibv_q_destroy(struct psl_van *v, struct ibv_q *q);
void ibv_stream_free(struct psl_van *v, struct ibv_stream *s);
void ibv_link_free(struct psl_van *v, struct ibv_link *l);

/* ibv_xfer.c */
int ibv_q_setup(struct psl_van *v, struct ibv_q *q, uint32_t rx_n, uint32_t rx_buf);
void ibv_q_teardown_bufs(struct ibv_q *q);
int ibv_q_start(struct psl_van *v, struct ibv_q *q, uint32_t peer_depth, uint32_t peer_buf);
int ibv_send_msg(struct psl_van *v, struct ibv_link *l, const void *meta, size_t meta_len,
		 const struct psl_van_seg *segs, uint32_t nseg, void *cookie);
void ibv_q_kick(struct psl_van *v, struct ibv_q *q);
void ibv_link_flush_wait(struct psl_van *v, struct ibv_link *l);
int ibv_poll_all(struct psl_van *v);
void ibv_arm_all(struct psl_van *v);
void ibv_sendop_finish(struct psl_van *v, struct ibv_sendop *op, int status);
void ibv_recvop_fail(struct psl_van *v, struct ibv_recvop *op, int status);
void ibv_q_fail(struct psl_van *v, struct ibv_q *q, int status);
void ibv_stream_fail(struct psl_van *v, struct ibv_stream *s, int status);
void ibv_q_broken(struct psl_van *v, struct ibv_q *q, int err, const char *what);

/* ibv_cxxio.c: C++ ps-lite's RDMA protocol on links and streams to C++ nodes */
bool ibv_cxx_known(struct psl_van *v, const char *where);
void ibv_cxx_remember(struct psl_van *v, const char *where);
int ibv_cxx_send(struct psl_van *v, struct ibv_link *l, struct ibv_sendop *op);
void ibv_cxx_pump(struct psl_van *v, struct ibv_link *l);
void ibv_cxx_kick_replies(struct psl_van *v, struct ibv_q *q);
void ibv_cxx_rx(struct psl_van *v, struct ibv_q *q, const struct ibv_wc *wc, const uint8_t *buf);
void ibv_cxx_op_gone(struct ibv_sendop *op);
void ibv_cxx_link_free(struct ibv_link *l);
void ibv_cxx_q_free(struct ibv_q *q);
void ibv_cxx_prepare(struct psl_van *v);
void ibv_cxx_fini(struct psl_van *v);

/* ibv_recv.c */
void ibv_rx_msg(struct psl_van *v, struct ibv_q *q, const uint8_t *buf, size_t len);
void ibv_read_done(struct psl_van *v, struct ibv_q *q, struct ibv_recvop *op, uint32_t seg,
		   int status);

/* van_ibverbs.c */
struct ibv_event *ibv_ev_new(struct psl_van *v, int kind);
void ibv_flush_events(struct psl_van *v);
void ibv_wake(struct psl_van *v);

/* ibv_progress.c */
void *ibv_progress_main(void *arg);
int ibv_drive(struct psl_van *v, int timeout_us);

/* ibv_pool.c: registered receive buffers, able to outlive the van */
int ibv_pool_new(struct ibv_pd *pd, struct ibv_pool **out);
int ibv_pool_get(struct ibv_pool *p, size_t len, struct ibv_pbuf **out, void **data,
		 uint32_t *lkey);
void ibv_pool_put(struct ibv_pbuf *b);
void ibv_pool_kill(struct ibv_pool *p);

#endif
