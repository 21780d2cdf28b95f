/*
 * van_ucx internals: the instance, outbound and inbound connections, sends
 * and received messages, shared by van_ucx.c (lifecycle, progress thread),
 * ucx_boot.c (TCP bootstrap: listening, inbound), ucx_connect.c (outbound),
 * ucx_send.c and ucx_recv.c.
 *
 * Threads. The UCX worker (UCS_THREAD_MODE_SERIALIZED) is used by one thread
 * at a time: whoever holds ucx_mu. The van's progress thread holds it while
 * it works and lets go only while it sleeps in epoll_wait; a sender that
 * finds it free (trylock) posts itself, one that does not leaves its send in
 * the van's inbox for the thread, and wakes the thread only if it sleeps.
 * The core's release of a message whose data UCX holds goes the same way.
 * No thread ever waits for UCX: a thread-safe worker made senders spin on
 * UCX's lock while the progress thread held it (14% of a core in a 1 MiB
 * push-pull over TCP), and a pure hand-off costs a wake-up per send.
 *
 * The thread sleeps on the worker's event fd (armed with ucp_worker_arm),
 * an eventfd, the listening socket and every bootstrap socket; with
 * PS_BUSY_POLL=1 it polls instead. UCX callbacks only record what happened;
 * the owner then calls the host (recv, send_done, peer_event) with no van
 * lock held but ucx_mu. After the thread ended, fini holds ucx_mu to the
 * end, and a late release takes it.
 *
 * Locks, outermost first: ucx_mu > lock (peers[]) > out->mu > inbox_mu >
 * cq_mu; ucx_mu is only ever waited for by the progress thread and fini.
 * v->mu guards the list of outbound connections and is never held while
 * taking another one.
 */
#ifndef PSL_VAN_UCX_VAN_H
#define PSL_VAN_UCX_VAN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <pslite/van.h>
#include <pslite/van_util.h>

#include "ucx_proto.h"

#define UCX_LOGNAME "van_ucx"
#define LOG(v, lvl, ...) psl_van_log((v)->host, (lvl), UCX_LOGNAME, __VA_ARGS__)

#define UCX_AM_ID 17	    /* our active message id */
#define UCX_AM_BATCH_ID 18 /* a batch of whole messages (ucx_proto.h) */
#define UCX_AM_JOINED_ID 19 /* a head and one data part (ucx_proto.h) */
#define UCX_JOINED_MAX 2048 /* largest head joined to its data part */

/* What an epoll event's data.ptr points at. */
enum ucx_fd_kind { FD_WAKE = 1, FD_WORKER, FD_LISTEN, FD_OUT, FD_IN };
struct ucx_fdh {
	int kind;
};

/* ------------------------------------------------------------ outbound -- */

enum ucx_out_state {
	OUT_IDLE = 0,	/* waiting to (re)try the TCP connect */
	OUT_CONNECTING, /* TCP connect in progress */
	OUT_HANDSHAKE,	/* greeting and hello sent, waiting for the welcome */
	OUT_READY,	/* UCP endpoint up: sends are posted */
	OUT_FAILED,	/* given up, or the peer went away: sends fail */
};

struct ucx_send;

/* A connection this node opened (connect()) to send to peer id. */
struct ucx_out {
	struct ucx_fdh fdh; /* FD_OUT */
	struct psl_van *v;
	int32_t id, my_id;
	char desc[192]; /* "node 9 at 127.0.0.1:40000" */
	char where[160]; /* "127.0.0.1:40000" */
	struct sockaddr_storage sa;
	socklen_t salen;

	/* progress thread only */
	int fd;
	uint8_t *rx;
	size_t rxlen, rxcap;
	bool greeted;
	uint8_t tx[96];
	size_t txlen, txoff;
	int64_t t_first, t_retry, t_deadline;
	int tries;
	ucs_status_ptr_t close_req; /* ucp_ep_close_nbx in progress */
	bool closing;
	bool freeable; /* retired and closed: free at the next sweep */

	/* under mu: what senders look at */
	pthread_mutex_t mu;
	int state; /* enum ucx_out_state */
	int err;   /* why it failed */
	ucp_ep_h ep;
	uint32_t conn, nonce; /* the peer's name for this connection */
	uint64_t seq;
	bool am_tcp; /* its active messages go over tcp: batches, joined parts */
	struct ucx_send *q_head, **q_tail; /* sends waiting for OUT_READY */
	uint32_t qlen;
	bool retired; /* replaced or disconnected: no events, close once flushed */
	bool force;   /* disconnected (its node is lost): closed at once,
		       * cancelling what is in flight */

	atomic_bool ep_error; /* UCX's error callback fired */
	atomic_int posted;    /* sends posted on ep and not yet finished */
	struct ucx_out *next; /* v->outs, under v->mu */
};

/* ------------------------------------------------------------- inbound -- */

/* IN_DRAIN: a peer of another van, told so by our greeting; its socket is
 * read and dropped until it closes (or t_deadline), so that our close does not
 * reset the connection before the peer has read the greeting. */
enum ucx_in_state { IN_HELLO = 0, IN_READY, IN_DRAIN, IN_CLOSED };

struct ucx_rx;

/* A connection a peer opened to this node; it owns the reassembly state of
 * the messages that peer sends. Progress thread only. Kept until fini, so
 * that active messages still in UCX's queues when the TCP connection ends
 * are delivered. */
struct ucx_in {
	struct ucx_fdh fdh; /* FD_IN */
	struct psl_van *v;
	uint32_t idx, nonce;
	int fd;
	int state;
	int32_t node_id;
	char desc[80];
	uint8_t rx[128];
	size_t rxlen;
	bool greeted;
	uint8_t *tx;
	size_t txlen, txoff;
	int64_t t_deadline;
	uint64_t next_seq;
	struct ucx_rx *head, *tail; /* messages being received, by seq */
	int64_t closed_at; /* when its bootstrap connection closed, or 0 */
};

/* After a peer's bootstrap connection closed (it ended), how long UCX may
 * still complete its messages into memory the core lent before the van
 * hands that memory back anyway: UCX does not always fail a rendezvous whose
 * sender died (without UCP_ERR_HANDLING_MODE_PEER), and the request would
 * wait for ever. Nothing can write into it any more by then: the sender is
 * gone, and what it sent before was read in the meantime. */
#define UCX_LOAN_GRACE_MS 2000

/* ---------------------------------------------------------------- send -- */

struct ucx_part_src {
	const void *data;
	size_t len;
	uint32_t seg;
	int32_t mem_type;
};

/* One send: meta and small segments copied into head, large segments sent
 * from the caller's memory as parts of their own. */
struct ucx_send {
	struct psl_van *v;
	struct ucx_out *out; /* where it was posted: its posted count */
	void *cookie;	     /* under v->sends_mu once registered */
	struct ucx_send *lprev, *lnext; /* v->sends: accepted, not finished */
	atomic_int refs;   /* posted requests not yet complete, + 1 for the poster */
	atomic_int status; /* first error, or 0 */
	struct ucx_send *next;
	uint16_t nparts;
	bool joined; /* nparts 2, sent as one active message (UCX_AM_JOINED_ID) */
	uint32_t nseg;
	size_t head_len;
	uint8_t *head;
	struct ucx_part_src *src; /* nparts - 1 */
	uint8_t (*hdr)[UCXP_AM_HDR_SIZE]; /* nparts, alive until completion */
	size_t bytes; /* the record's size (psl__ucx_send_free) */
};
/* Frees a send record (kept for reuse when it is of the usual size). */
void psl__ucx_send_free(struct ucx_send *s);

/* ------------------------------------------------------------- receive -- */

/* PART_LOAN: received into memory the core lent (psl_van_host.recv_dest),
 * not yet handed back; PART_LENT: handed back with the message. */
enum { PART_NONE = 0, PART_UCX, PART_HEAP, PART_POOL, PART_LOAN, PART_LENT };

/*
 * Rendezvous receive buffers of 64 KiB and more come from a cache, so that
 * the same tensor sizes arriving again land in pages already mapped (fresh
 * buffers cost a page fault and a page clear per 4 KiB, a quarter of the
 * time of a 1 MiB receive over shared memory). Classes: 64 KiB << k and
 * 96 KiB << k. Released from any thread; bounded by PS_UCX_RX_CACHE_MB.
 */
#define UCX_POOL_MIN (64u << 10)
#define UCX_POOL_CLASSES 36
#define UCX_POOL_PER_CLASS 64

struct ucx_pool {
	pthread_mutex_t mu;
	void *head[UCX_POOL_CLASSES]; /* free buffers, linked through their start */
	uint32_t count[UCX_POOL_CLASSES];
	size_t bytes, max_bytes;
};

struct ucx_rpart {
	struct ucx_rx *m;
	void *data;
	size_t len;
	uint32_t seg;
	uint8_t kind;
	uint8_t cls; /* pool class of a PART_POOL buffer */
	bool arrived;
	bool rndv;  /* data still on its way (rendezvous) until rndv_cb */
	bool lent_writing; /* counted in lent_writing of the van */
	void *loan; /* PART_LOAN's, for recv_dest_put */
};

struct ucx_rx {
	struct psl_van_rmsg pub; /* first: release() casts back */
	struct psl_van *v;
	struct ucx_in *in; /* NULL once orphaned by fini */
	uint64_t seq;
	uint16_t nparts, arrived, pending;
	uint32_t nseg;
	int err;
	struct ucx_rx *next, *prev;
	struct psl_van_rseg *segs;
	struct ucx_rpart parts[];
};

/* ------------------------------------------------------------ instance -- */

struct psl_van {
	const struct psl_van_host *host;
	ucp_context_h ctx;
	ucp_worker_h worker;
	ucp_address_t *addr;
	size_t addr_len;
	pthread_mutex_t ucx_mu;	 /* recursive: whoever holds it owns the worker */
	unsigned mem_caps;	 /* UCXP_MEM_* */
	unsigned tl_found;	 /* UCXP_TL_* */
	unsigned ucx_version;	 /* UCP_VERSION(major, minor) */
	char ucx_version_str[32];
	char transports[192];

	/* settings */
	bool busy_poll; /* PS_BUSY_POLL=1 or auto */
	bool poll_auto; /* PS_BUSY_POLL=auto: the window from the gaps */
	int64_t spin_ns; /* PS_BUSY_POLL_US, in ns */
	long idle_wake_us; /* PS_UCX_IDLE_WAKE_US, -1: none */
	size_t inline_max;
	int handshake_ms, connect_ms, linger_ms;
	bool peer_errors; /* PS_UCX_ERR_MODE=peer: UCP_ERR_HANDLING_MODE_PEER */
	bool lend;	  /* PS_UCX_PULL_IN_PLACE: ask the core where data goes */
	bool rndv_put;	  /* we asked UCX for UCX_RNDV_SCHEME=put_zcopy */
	size_t batch_max; /* PS_UCX_BATCH_KB: largest batch payload, 0 = none */
	size_t joined_max; /* largest head sent in a data part's header (tcp), 0 = none */
	/* the worker's owner delivers: what its callbacks send waits here,
	 * in call order, and goes out in batches after the round */
	bool deferring;
	struct ucx_send *dq_head, *dq_tail;
	uint64_t batches, batched; /* batches sent, messages in them (owner) */
	uint64_t joined;	   /* messages sent as one joined active message */
	int lent_writing; /* lent parts UCX still writes into (worker's owner) */

	int epfd, wake_fd, lfd, efd;
	struct ucx_fdh h_wake, h_worker, h_listen;
	char listen_desc[96];
	pthread_t thread;
	bool running;
	atomic_bool stop;
	atomic_bool sleeping; /* the thread is in (or about to enter) epoll_wait */
	atomic_bool kicked;   /* a wake-up is written and not yet read */
	/* caller-driven progress (ucx_drive.c): callers drive the worker
	 * until then (ns), and the thread sleeps meanwhile without the
	 * worker's event fd (efd_off, the thread's own) */
	_Atomic int64_t driven_until;
	bool efd_off;
	bool in_round; /* the worker's owner is in progress_once (ucx_mu) */

	/* the inbox: work for the thread from other threads */
	pthread_mutex_t inbox_mu;
	struct ucx_send *sq_head, *sq_tail; /* sends to post, in call order */
	struct ucx_rx *rq_head;		    /* messages whose UCX data to release */
	bool owner_active;		    /* the thread takes the inbox */
	atomic_bool inbox_full;
	atomic_bool boot_dirty;
	int64_t next_timer;
	/* nodes disconnected by the core (lost): their inbound connections
	 * are closed by the progress thread (v->mu) */
	int32_t gone[32];
	int ngone;

	pthread_rwlock_t lock; /* peers[] */
	struct ucx_out **peers;
	int npeers;
	pthread_mutex_t mu; /* outs */
	struct ucx_out *outs;
	atomic_int ep_errors;

	struct ucx_in **ins; /* progress thread only */
	uint32_t nins, cap_ins;
	uint32_t nonce_seed;
	bool secret;		     /* PS_JOB_SECRET: hellos carry proofs */
	struct psl_van_nonces nonces; /* of the proofs taken (progress thread) */

	pthread_mutex_t cq_mu; /* sends done by UCX, waiting for send_done */
	struct ucx_send *done_head, *done_tail;
	atomic_int inflight; /* sends accepted and not yet finished */
	pthread_mutex_t sends_mu; /* sends, and each one's cookie */
	struct ucx_send *sends;	  /* those sends: fini fails what UCX never completes */
	atomic_int requests; /* UCX send requests not yet completed */

	struct ucx_rx *ready_head, *ready_tail; /* for host->recv; progress thread */
	struct ucx_rx *orphans; /* receives cut by fini, freed with the worker */
	struct ucx_pool pool;

	atomic_int refs; /* 1 for the van + 1 per message the core holds */
	bool stopping;	 /* fini started: no more host callbacks but send_done */
	/* fini left sends that UCX never completed (a peer killed mid-
	 * rendezvous): their requests keep UCX's registration cache in use,
	 * and ucp_cleanup would abort on its assertion; the context is left */
	bool keep_ctx;
};

/* van_ucx.c */
/* Drives UCX, then hands what happened to the host; the caller owns the
 * worker. Returns true if anything happened. */
bool psl__ucx_progress_once(struct psl_van *v);
void psl__ucx_wake(struct psl_van *v);
/* Wakes the thread if it sleeps (after putting work where it looks). */
void psl__ucx_kick(struct psl_van *v);
int psl__ucx_errno(ucs_status_t st);
void psl__ucx_unref(struct psl_van *v);

/* ucx_drive.c: caller-driven progress (psl_van_ops.progress) */
int psl__ucx_drive(struct psl_van *v, int timeout_us);
/* The progress thread, about to sleep: true while callers drive (the
 * worker's event fd is then out of its epoll set, and *us capped); false
 * with the event fd back, to arm the worker. */
bool psl__ucx_aside(struct psl_van *v, long *us);

/* ucx_boot.c: the listening port, inbound connections, socket helpers */
int psl__ucx_listen(struct psl_van *v, const char *host, int port, int *bound);
void psl__ucx_accept(struct psl_van *v);
void psl__ucx_in_io(struct ucx_in *in, uint32_t events);
void psl__ucx_in_tick(struct psl_van *v, int64_t now);
void psl__ucx_sockaddr_desc(const struct sockaddr *sa, char *out, size_t len);
void psl__ucx_tune_socket(int fd);
int psl__ucx_ep_ctl(struct psl_van *v, int op, int fd, uint32_t events, void *ptr);
int psl__ucx_write_some(int fd, const uint8_t *buf, size_t len, size_t *off);
void psl__ucx_schedule(struct psl_van *v, int64_t t);

/* ucx_connect.c: outbound connections */
void psl__ucx_out_io(struct ucx_out *o, uint32_t events);
/* Timers, retries, retired connections; returns ms to the next deadline
 * (-1: none). */
int psl__ucx_boot_tick(struct psl_van *v);
void psl__ucx_out_fail(struct ucx_out *o, int event, int err, const char *detail);
void psl__ucx_out_free(struct ucx_out *o);
void psl__ucx_in_free(struct ucx_in *in);
struct ucx_out *psl__ucx_out_new(struct psl_van *v, const struct psl_van_peer *peer,
				 int32_t my_id, int *err);

/* ucx_send.c */
int psl__ucx_send(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		  const struct psl_van_seg *segs, uint32_t nseg, void *cookie);
int psl__ucx_post(struct ucx_out *o, struct ucx_send *s);
void psl__ucx_send_put(struct ucx_send *s, int status);
void psl__ucx_send_finish(struct ucx_send *s);
int psl__ucx_dispatch_done(struct psl_van *v);
int psl__ucx_post_inbox(struct psl_van *v);
/* Posts what was sent while deferring, consecutive single-part messages to
 * one peer as batches; the caller owns the worker. Returns how many. */
int psl__ucx_post_deferred(struct psl_van *v);
/* Tells the core now that every send posted on o failed with err: UCX may
 * never complete a rendezvous to a peer that is gone, even after its
 * endpoint's forced close (UCX 1.13 over rc_verbs); the requests finish
 * later, or at fini, without another send_done. Returns how many. o NULL:
 * every send of the van. */
int psl__ucx_fail_posted(struct psl_van *v, struct ucx_out *o, int err);
/* fini, the worker no longer progressed: send_done(err) for every send UCX
 * did not complete (a rendezvous to a dead peer without peer error handling
 * never does); their memory goes with the worker. Returns how many. */
int psl__ucx_fail_unfinished(struct psl_van *v, int err);
/* After the worker is destroyed: frees those sends. */
void psl__ucx_free_unfinished(struct psl_van *v);

/* ucx_recv.c */
ucs_status_t psl__ucx_am_cb(void *arg, const void *header, size_t header_length, void *data,
			    size_t length, const ucp_am_recv_param_t *param);
ucs_status_t psl__ucx_am_joined_cb(void *arg, const void *header, size_t header_length,
				   void *data, size_t length, const ucp_am_recv_param_t *param);
ucs_status_t psl__ucx_am_batch_cb(void *arg, const void *header, size_t header_length,
				  void *data, size_t length, const ucp_am_recv_param_t *param);
int psl__ucx_dispatch_ready(struct psl_van *v);
void psl__ucx_in_drop_all(struct ucx_in *in);
/* fini: hands back what the core lent to messages UCX still writes into
 * (nothing progresses the worker any more); returns how many. */
int psl__ucx_rx_orphan_loans(struct psl_van *v);
/* The same for the messages still arriving on in (its peer ended): they
 * fail when they complete. */
int psl__ucx_in_reclaim_loans(struct ucx_in *in);
void psl__ucx_rx_free_orphans(struct psl_van *v, bool worker_alive);
void psl__ucx_rx_drop_ready(struct psl_van *v);
int psl__ucx_release_inbox(struct psl_van *v);
void psl__ucx_pool_init(struct ucx_pool *pool, size_t max_bytes);
void psl__ucx_pool_fini(struct ucx_pool *pool);

#endif
