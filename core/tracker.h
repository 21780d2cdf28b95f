/* The request tracker of a customer (tracker.c): outstanding requests by
 * timestamp, the nodes that still owe each an answer, completion. Every
 * function takes the customer whose tracker it is; "_locked" ones need its
 * mu held. */
#ifndef PSL_CORE_TRACKER_H
#define PSL_CORE_TRACKER_H

#include <stdbool.h>
#include <stdint.h>

#include "pslite.h"
#include "van_host.h"

enum { PSL__REQ_FREE = 0, PSL__REQ_PENDING, PSL__REQ_COMPLETING, PSL__REQ_DONE };

/* One outstanding request. Pointers stay valid while it is PENDING or
 * COMPLETING (entries are never moved). */
struct psl__req {
	int ts;
	int state;
	int status;   /* first error, or 0 */
	int awaiting; /* responses still expected */
	int holds;    /* other conditions still open (pushpull's push half) */
	int loans;    /* buffers of this request lent to the van (recv_dest):
		       * it cannot complete before they come back */
	int parent;   /* ts of a request to notify on completion, or -1 */
	int waiters;  /* threads in psl__req_wait for it */
	bool gave_up; /* a psl__req_wait_ms timed out on it: freeing the
		       * customer cancels it at once */
	int64_t deadline; /* psl__now_ms() after which it fails with
			   * -ETIMEDOUT (customer's timeout_ms), 0 = none */
	psl_kv_cb cb;
	void *arg;
	void *priv; /* the app layer's per-request state */
	uint64_t *bits; /* which node indexes still owe a response */
	/* the sendref of its sends whose buffers a van must let go of before
	 * it completes (the caller's zero-copy data, its own state): each
	 * such send holds it (psl__req_hold_sends_locked) */
	struct psl__sendref sent;
	struct psl__customer *owner;
};

struct psl__customer;

/* Node index for request bitmaps: 0 for the scheduler, id-7 for others. */
static inline int psl__node_index(int id)
{
	return id == 1 ? 0 : id - 7;
}

/* Sets up / frees the tracker of c for node indexes 0..nodes-1. */
int psl__tracker_init(struct psl__customer *c, int nodes);
void psl__tracker_free(struct psl__customer *c);

/* With c->mu held: a new PENDING request. */
struct psl__req *psl__req_new_locked(struct psl__customer *c);
/* With c->mu held: the PENDING request ts, or NULL. */
struct psl__req *psl__req_find_locked(struct psl__customer *c, int ts);
/* With c->mu held: mark node id as owing a response. */
void psl__req_expect_locked(struct psl__customer *c, struct psl__req *r, int id);
bool psl__req_awaits_locked(struct psl__customer *c, struct psl__req *r, int id);
/* With c->mu held: node id answered (status 0 or -errno). Returns true if the
 * request is now complete: the caller must then call psl__req_finish after
 * unlocking. */
bool psl__req_answer_locked(struct psl__customer *c, struct psl__req *r, int id, int status);
/* With c->mu held: one hold released. Same return as above. */
bool psl__req_unhold_locked(struct psl__customer *c, struct psl__req *r, int status);
/* With c->mu held: n sends of r are about to go out whose buffers r's
 * completion must wait for. Returns the sendref to give psl__send for each
 * (its done gives the hold back; call ref->done(ref, err) for one that is
 * not passed to psl__send after all). */
static inline struct psl__sendref *psl__req_hold_sends_locked(struct psl__req *r, int n)
{
	r->holds += n;
	return &r->sent;
}
/* With c->mu held: one loan came back. Same return as above. */
bool psl__req_loan_back_locked(struct psl__customer *c, struct psl__req *r, int status);
/* Completes r: on_complete, callback, wake waiters, notify parent. */
void psl__req_finish(struct psl__customer *c, struct psl__req *r);
/* Waits for request ts; returns its status. */
int psl__req_wait(struct psl__customer *c, int ts);
/* The same for at most timeout_ms (< 0: no limit): -ETIMEDOUT if request
 * ts is still pending then. */
int psl__req_wait_ms(struct psl__customer *c, int ts, int timeout_ms);

struct psl__office;
/* progress.c (PS_CALLER_PROGRESS=1): the caller drives c's van until
 * request ts is settled, for a short while, or until dl (CLOCK_MONOTONIC,
 * NULL: none); c->mu not held. Does nothing without the setting, or when
 * the van has no progress entry. */
void psl__drive(struct psl__customer *c, int ts, const struct timespec *dl);
/* Before the van's fini: no more drives, and those running ended. */
void psl__drive_stop(struct psl__office *o);
/* The calling thread is driving a van (its deliveries are the caller's). */
extern __thread bool psl__driving;
/* With c->mu held: fails r with err whoever still owes it an answer (its
 * holds and loans stay). Same return as psl__req_answer_locked. */
bool psl__req_fail_locked(struct psl__customer *c, struct psl__req *r, int err);
/* With c->mu held: the node index whose answer r still waits for first, as a
 * node id (1 the scheduler), or 0 when none. */
int psl__req_first_owing_locked(struct psl__customer *c, const struct psl__req *r);

#endif
