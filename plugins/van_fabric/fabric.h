/* van_fabric internals shared by its files. */
#ifndef PSL_VAN_FABRIC_H
#define PSL_VAN_FABRIC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

#include <pslite/van.h>
#include <pslite/van_util.h>

#include "fab_mrcache.h"
#include "fab_proto.h"

#define VAN "fabric"
#define LOG(v, lvl, ...) psl_van_log((v)->host, (lvl), "van_fabric", __VA_ARGS__)

/* ------------------------------------------------------------- buffers -- */
/* Buffers the van owns: receive buffers for headers and for parts, and the
 * send-side headers. Registered once when the provider needs it, pooled by
 * size class, and able to outlive the van (the core may release a received
 * message after fini). */
#define FAB_POOL_CLASSES 15 /* 4 KiB << 0..14: up to 64 MiB */

enum fab_ctx_kind { CTX_TX_HDR = 1, CTX_TX_PART, CTX_RX_HDR, CTX_RX_PART };

/* The context of one posted operation: fi_context2 first (FI_CONTEXT2). */
struct fab_ctx {
	struct fi_context2 fc;
	uint8_t kind;
	uint8_t part;
	void *obj;
};

struct fab_pool;
struct fab_buf {
	struct fab_pool *pool;
	struct fab_buf *next;		  /* free list */
	struct fab_buf *all_prev, *all_next; /* every live buffer */
	size_t cap;
	int cls; /* size class, -1: not pooled */
	struct fid_mr *mr;
	void *desc;
	struct fab_ctx ctx; /* when posted as a header receive */
	bool posted;
	uint8_t *data;
};

struct fab_pool {
	pthread_mutex_t mu;
	int refs; /* the van, and every buffer out of the pool */
	bool dead;
	struct fid_domain *domain; /* NULL: nothing is registered */
	struct fid_ep *ep;	   /* for FI_MR_ENDPOINT */
	uint64_t mr_access;
	bool app_keys; /* no FI_MR_PROV_KEY: the van chooses each key */
	struct fab_buf *free[FAB_POOL_CLASSES];
	size_t cached, max_cached;
	struct fab_buf all;
	const struct psl_van_host *host;
};

int fab_pool_new(const struct psl_van_host *host, size_t max_cached, struct fab_pool **out);
/* A key for the next registration where the application chooses keys. */
uint64_t fab_next_key(void);
/* Makes buffers registered from now on (call before the first get). */
void fab_pool_set_domain(struct fab_pool *p, struct fid_domain *d, struct fid_ep *ep,
			 uint64_t mr_mode);
int fab_pool_get(struct fab_pool *p, size_t len, struct fab_buf **out);
void fab_pool_put(struct fab_buf *b);
/* Puts back every buffer still marked posted (the endpoint is closed). */
void fab_pool_put_posted(struct fab_pool *p);
/* The van is going: deregister everything, free what is idle; buffers still
 * out are freed at their put. Drops the van's reference. */
void fab_pool_kill(struct fab_pool *p);

/* ------------------------------------------------------------ the van -- */
#define FAB_API FI_VERSION(1, 9)
#define OQ_WINDOW (1u << 20)
#define HANDSHAKE_MS 10000
/* after disconnect, a lost node's sends still pending fail (ECONNRESET) */
#define FAB_DROP_GRACE_MS 1000

enum conn_type { CONN_LISTEN = 1, CONN_OUT, CONN_IN, CONN_WAKE, CONN_CQ };
enum peer_state { P_CONNECTING = 0, P_HANDSHAKE, P_UP, P_DOWN };

struct fab_conn {
	int type;
	int fd;
	uint8_t in[FAB_HELLO_WIRE + 96];
	size_t in_len;
	bool greeted;
	void *owner;
};

struct fab_txop;

/* A node we send to (connect). Freed only at fini. */
struct fab_peer {
	int32_t id, my_id;
	char host[128];
	int port;
	char where[160]; /* "host:port" for messages */
	pthread_mutex_t mu; /* state, queue, seq, inflight */
	int state;
	uint32_t stream, hdr_max;
	fi_addr_t fa;
	uint32_t next_seq;
	struct fab_txop *qhead, *qtail; /* not yet fully posted, in order */
	int inflight;			/* posted, not yet complete */
	struct fab_txop *live;		/* every op not finished yet */
	atomic_bool retiring;		/* replaced or disconnected */
	int64_t drop_at_ms;		/* disconnected (a lost node): what it still
				 * holds fails then (under mu; 0 never) */
	bool broken;			/* a send failed half-way */
	/* progress thread only */
	struct fab_conn conn;
	bool hello_sent, bye_sent, told;
	int64_t deadline_ms, retry_at_ms, hs_deadline_ms, hs_start_ms;
	int retry_ms;
	struct fab_peer *next_all;
	struct fab_peer *next_new;
};

/* A node that sends to us (accepted connection). Progress thread only. */
struct fab_stream {
	uint32_t id;
	int32_t sender;
	char where[64];
	struct fab_conn conn;
	struct fab_oq oq;
	bool open, closing, have_last;
	uint32_t last;
	int64_t close_at;
	struct fab_stream *next_all;
};

struct fab_txpart {
	const void *data;
	uint64_t len;
	bool inl;
	struct fab_mrc_ent *mre;
	void *desc;
	struct fab_ctx ctx;
};

struct fab_txop {
	struct fab_peer *peer;
	void *cookie;
	uint32_t seq, nparts, nposts, posted;
	atomic_int pending; /* posted parts not complete, +1 until all are posted */
	atomic_int status;
	struct fab_buf *hdr, *meta;
	size_t hdr_len;
	struct fab_txop *qnext;
	struct fab_txop *lprev, *lnext; /* the peer's live ops (fini) */
	struct fab_ctx hctx;
	struct fab_txpart part[];
};

struct fab_rxpart {
	struct fab_buf *buf;
	struct fab_ctx ctx;
};

struct fab_rx {
	struct psl_van_rmsg pub;
	struct fab_oq_ent oq;
	struct fab_buf *hdr;
	uint32_t stream, nparts;
	int pending;
	bool failed, orphan;
	struct fab_rx *next_orphan;
	struct psl_van_rseg *segs;
	struct fab_rxpart part[];
};

struct psl_van {
	const struct psl_van_host *host;
	/* configuration */
	char prov_filter[128];
	char prov[48];	 /* provider chosen at init */
	char avail[160]; /* providers found */
	bool busy_poll, force_mr, want_hmem; /* want_hmem: PS_FABRIC_HMEM */
	bool poll_auto; /* PS_BUSY_POLL=auto: the window from the gaps */
	int64_t spin_ns; /* PS_BUSY_POLL_US: the poll window after a completion */
	int bad_params;	      /* settings that were not numbers in range */
	long mr_cache;	      /* PS_FABRIC_MR_CACHE: -1 auto, 0, 1 */
	size_t mr_cache_size; /* PS_FABRIC_MR_CACHE_SIZE */
	size_t hdr_buf;
	int rx_depth, linger_ms, connect_ms;
	struct fi_info *hints, *info;
	/* libfabric objects */
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	int cq_fd; /* -1: no wait object */
	bool need_mr, hmem, ep_lock;
	pthread_mutex_t ep_mu;
	uint8_t name[FAB_ADDR_MAX];
	size_t name_len;
	struct fab_pool *pool;
	struct fab_mrc mrc;
	bool mrc_ok, cache_sends;
	/* bootstrap */
	struct fab_conn listen, wake, cqc;
	int epfd;
	int port;
	/* peers we send to */
	pthread_rwlock_t lock; /* peers[] */
	struct fab_peer **peers;
	int npeers;
	pthread_mutex_t mu; /* newpeers */
	struct fab_peer *newpeers;
	struct fab_peer *all_peers; /* progress thread */
	atomic_int retry;	    /* a queue is waiting for the provider */
	/* streams we receive on (progress thread) */
	struct fab_stream **streams;
	uint32_t nstreams, next_stream;
	struct fab_stream *all_streams;
	struct fab_rx *orphans;
	int hdr_posted;
	int mismatches;
	bool secret;		     /* PS_JOB_SECRET: hellos carry proofs */
	struct psl_van_nonces nonces; /* of the proofs taken (progress thread) */
	/* threads */
	pthread_t thread;
	bool running;
	atomic_bool stop, closing;
	atomic_bool bound; /* the progress thread runs: callers may drive */
	/* who reads the CQ (fab_progress.c): the progress thread, or a caller
	 * that drives (progress()) by trylock */
	pthread_mutex_t cq_mu;
	_Atomic int64_t driven_until; /* ns: callers drove until about then */
	bool cq_off;		      /* the CQ fd is out of epoll (progress thread) */
};

static inline const char *fab_param(struct psl_van *v, const char *name, const char *def)
{
	const char *s = psl_van_param(v->host, name);
	return s ? s : def;
}

static inline void fab_wake(struct psl_van *v)
{
	uint64_t one = 1;
	ssize_t rc = write(v->wake.fd, &one, sizeof(one));
	(void)rc;
}

#define EP_LOCK(v)                                  \
	do {                                        \
		if ((v)->ep_lock)                   \
			pthread_mutex_lock(&(v)->ep_mu); \
	} while (0)
#define EP_UNLOCK(v)                                  \
	do {                                          \
		if ((v)->ep_lock)                     \
			pthread_mutex_unlock(&(v)->ep_mu); \
	} while (0)

/* fab_xfer.c: sending, receiving, completions */
int fab_send(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
	     const struct psl_van_seg *segs, uint32_t nseg, void *cookie);
int fab_post_queue(struct psl_van *v, struct fab_peer *p);
void fab_fail_queue(struct psl_van *v, struct fab_peer *p, int err);
/* With p->mu held: p is down; its queued sends and its posted ones (these
 * before the provider let go of them: it may still read their buffers) are
 * reported done with err. */
void fab_fail_pending(struct psl_van *v, struct fab_peer *p, int err);
void fab_op_free(struct psl_van *v, struct fab_txop *op);
void fab_op_unlink(struct fab_peer *p, struct fab_txop *op);
void fab_rx_free(struct fab_rx *r);
int fab_post_hdr(struct psl_van *v);
void fab_report_down(struct psl_van *v, struct fab_peer *p, int err, const char *detail);
int fab_drain_cq(struct psl_van *v);

/* fab_progress.c: the progress thread, and progress() on callers' threads */
void *fab_progress_main(void *arg);
int fab_drive(struct psl_van *v, int timeout_us);

/* fab_conn.c: the bootstrap connections */
int fab_ep_add(struct psl_van *v, struct fab_conn *c, uint32_t events);
int fab_send_hello(int fd, const struct fab_hello *h);
void fab_peer_io(struct psl_van *v, struct fab_peer *p, uint32_t events);
void fab_stream_io(struct psl_van *v, struct fab_stream *s, uint32_t events);
void fab_on_accept(struct psl_van *v);
void fab_stream_free(struct psl_van *v, struct fab_stream *s);
/* Timers and state changes of peers and streams; returns the epoll timeout. */
int fab_housekeeping(struct psl_van *v);

static inline struct fab_stream *fab_stream_get(struct psl_van *v, uint32_t id)
{
	return id < v->nstreams ? v->streams[id] : NULL;
}

/* ------------------------------------------------------------ bootstrap -- */
/* plain TCP helpers (fab_boot.c) */
void fab_numeric_host(const char *host, char *out, size_t len);
int fab_tcp_listen(const char *host, int port, int *fd, int *bound_port);
/* Non-blocking connect; 0 (connected or in progress) or -errno. */
int fab_tcp_connect(const char *host, int port, int *fd);
int fab_write_all(int fd, const void *buf, size_t len);
void fab_keepalive(int fd);
void fab_sockname(int fd, bool peer, char *out, size_t len);

#endif
