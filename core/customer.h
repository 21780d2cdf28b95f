/* Customers: the app_id/customer_id endpoints of this node, their registry,
 * and the routing of received data messages to them. Each customer tracks
 * its outstanding requests (tracker.h). */
#ifndef PSL_CORE_CUSTOMER_H
#define PSL_CORE_CUSTOMER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "message.h"
#include "pslite.h"
#include "pslite/van.h"
#include "tracker.h"

struct psl__office;

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
	struct psl__office *office; /* the node it belongs to (a joint process has two) */
	int app_id;
	int customer_id;
	const struct psl__customer_ops *ops;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* the tracker (tracker.c), under mu */
	struct psl__req **ring;
	uint32_t cap; /* power of two */
	int nwords;   /* uint64 words per request bitmap */
	int next_ts;
	int pending;
	int timeout_ms; /* deadline of new requests, 0 = none */
	struct psl__req *free_list;
	int dispatching; /* receive threads in its on_msg (customer.c's reg_mu) */
	struct psl__customer *next;
};

int psl__customer_init(struct psl__office *o, struct psl__customer *c, int app_id, int customer_id,
		       const struct psl__customer_ops *ops);
/* Registers c, delivering any message that arrived for it before. */
int psl__customer_add(struct psl__customer *c);
/* True, with an error that names call, when the calling thread runs one of
 * c's callbacks (its on_msg), or after_thread is true (pslite's CUDA
 * thread, where worker callbacks run too): c cannot be removed there. */
bool psl__customer_in_own_callback(const struct psl__customer *c, bool after_thread,
				   const char *call);
/* Unregisters c, waits for its outstanding requests, frees its tracker. */
void psl__customer_remove(struct psl__office *o, struct psl__customer *c);

/* Routes a received data message to its customer (or holds it until the
 * customer exists). Takes ownership of raw. */
void psl__customer_dispatch(struct psl__office *o, struct psl__meta *m, struct psl_van_rmsg *raw);
/* psl_van_host.recv_dest for a data message with meta m (sender set). */
int psl__customer_recv_dest(struct psl__office *o, const struct psl__meta *m, uint32_t seg,
			    size_t len, struct psl_van_dest *dest);
/* Runs on_finalize of every customer (at finalize, before the van stops). */
void psl__customers_finalize(struct psl__office *o);
/* Drops every held message (at finalize). */
void psl__customer_drop_held(struct psl__office *o);
/* Answers every request waiting on node id with err (node lost). */
void psl__customers_node_lost(struct psl__office *o, int id, int err);
/* The timer's tick (now: psl__now_ms()): fails requests past their deadline
 * with -ETIMEDOUT; warns of messages held for a missing customer and fails
 * them back to their sender after PS_HELD_TIMEOUT. */
void psl__customers_tick(struct psl__office *o, int64_t now);
/* How long the timer may wait between ticks, at most period: a quarter of
 * the shortest request deadline of this node's customers (at least 10 ms),
 * so that a deadline below a second fires near its time. */
int psl__customers_period_ms(struct psl__office *o, int period);

#endif
