/*
 * van_zmq's private declarations: the van object, shared by van_zmq.c (the
 * sockets, sends and the receive thread) and zmq_progress.c (caller-driven
 * progress).
 */
#ifndef PSL_VAN_ZMQ_H
#define PSL_VAN_ZMQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <pslite/van.h>

struct zpeer;
struct zrid;

struct psl_van {
	const struct psl_van_host *host;
	struct zrid *rid; /* [MAX_TRACKED_ID] */
	int rcvhwm;
	bool secret; /* the job has a secret: identities carry proofs */
	int64_t max_msg; /* bytes, PS_ZMQ_MAX_MSG_MB */
	void *ctx;
	void *router;
	int router_fd; /* its ZMQ_FD */
	int wake_fd;
	pthread_t thread;
	bool running;
	atomic_bool stop;
	pthread_rwlock_t lock; /* protects peers[] and grave */
	struct zpeer **peers;
	int npeers;
	struct zpeer *grave;
	atomic_uint gen; /* bumped when peers[] changes */
	atomic_uint mon_seq;
	bool busy_poll;
	int64_t spin_ns; /* PS_BUSY_POLL: keep polling this long after a message */
	int linger_ms;
	int io_threads;
	int busy_min_cpus; /* PS_ZMQ_BUSY_POLL_MIN_CPUS */
	/* caller-driven progress (zmq_progress.c) */
	pthread_mutex_t rx_mu;	  /* whoever holds it reads the ROUTER */
	atomic_bool bound;	  /* the ROUTER and the receive thread exist */
	atomic_bool router_look;  /* a caller left messages on the ROUTER */
	_Atomic int64_t aside_until; /* callers read the ROUTER until then (ns) */
	bool aside;		  /* (receive thread) it left the ROUTER to them */
	bool router_clean;	  /* (rx_mu) the last drain ended with EAGAIN */
};

/* Reads up to ZV_DRAIN_MAX messages from the ROUTER (rx_mu held) and hands
 * them to the host; returns how many it read. At ZV_DRAIN_MAX more may
 * wait, and the ROUTER's ZMQ_FD will not say so. */
#define ZV_DRAIN_MAX 256
int zv_drain_router(struct psl_van *v);
/* Wakes the receive thread. */
void zv_wake(struct psl_van *v);

/* zmq_progress.c */
extern __thread struct psl_van *zv_reading;
int zv_progress(struct psl_van *v, int timeout_us);
bool zv_aside(struct psl_van *v, int *timeout_ms, bool *look);

#endif
