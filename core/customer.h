/* Customers (an app_id/customer_id endpoint on this node) and the tracker of
 * their outstanding requests. */
#ifndef PSL_CORE_CUSTOMER_H
#define PSL_CORE_CUSTOMER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "message.h"
#include "pslite.h"
#include "pslite/van.h"

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
	psl_kv_cb cb;
	void *arg;
	void *priv; /* the app layer's per-request state */
	uint64_t *bits; /* which node indexes still owe a response */
};

struct psl__customer;

struct psl__customer_ops {
	/* A data message for this customer. Takes ownership of raw. */
	void (*on_msg)(struct psl__customer *c, struct psl__meta *m, struct psl_van_rmsg *raw);
	/* Request r completes (outside the lock): finish the result, may set
	 * r->status; then free r->priv. */
	void (*on_complete)(struct psl__customer *c, struct psl__req *r);
	/* Optional. The node finalizes: after the final barrier, before the van
	 * stops (messages can still be sent). */
	void (*on_finalize)(struct psl__customer *c);
	/* Optional. The van asks where segment seg (len bytes) of the message
	 * with meta m should be received (psl_van_host.recv_dest); called with
	 * the registry locked. 0 and *dest filled, or -errno. */
	int (*recv_dest)(struct psl__customer *c, const struct psl__meta *m, uint32_t seg,
			 size_t len, struct psl_van_dest *dest);
};

struct psl__customer {
	int app_id;
	int customer_id;
	const struct psl__customer_ops *ops;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct psl__req **ring;
	uint32_t cap; /* power of two */
	int nwords;   /* uint64 words per request bitmap */
	int next_ts;
	int pending;
	struct psl__req *free_list;
	struct psl__customer *next;
};

/* Node index for request bitmaps: 0 for the scheduler, id-7 for others. */
static inline int psl__node_index(int id)
{
	return id == 1 ? 0 : id - 7;
}

int psl__customer_init(struct psl__customer *c, int app_id, int customer_id,
		       const struct psl__customer_ops *ops);
/* Registers c, delivering any message that arrived for it before. */
int psl__customer_add(struct psl__customer *c);
/* Unregisters c, waits for its outstanding requests, frees its tracker. */
void psl__customer_remove(struct psl__customer *c);

/* Routes a received data message to its customer (or holds it until the
 * customer exists). Takes ownership of raw. */
void psl__customer_dispatch(struct psl__meta *m, struct psl_van_rmsg *raw);
/* psl_van_host.recv_dest for a data message with meta m (sender set). */
int psl__customer_recv_dest(const struct psl__meta *m, uint32_t seg, size_t len,
			    struct psl_van_dest *dest);
/* Runs on_finalize of every customer (at finalize, before the van stops). */
void psl__customers_finalize(void);
/* Drops every held message (at finalize). */
void psl__customer_drop_held(void);

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
/* With c->mu held: one loan came back. Same return as above. */
bool psl__req_loan_back_locked(struct psl__customer *c, struct psl__req *r, int status);
/* Completes r: on_complete, callback, wake waiters, notify parent. */
void psl__req_finish(struct psl__customer *c, struct psl__req *r);
/* Answers every request waiting on node id with err (node lost). */
void psl__customers_node_lost(int id, int err);
/* Waits for request ts; returns its status. */
int psl__req_wait(struct psl__customer *c, int ts);

#endif
