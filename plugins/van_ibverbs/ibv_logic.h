/*
 * van_ibverbs protocol logic that needs no hardware, kept apart so that
 * tests/test_ibv_logic.c drives it directly: credits, the sender's
 * rendezvous state, in-order delivery, queue pair choice, the eager or
 * rendezvous split of a message, and the registration cache.
 */
#ifndef PSL_VAN_IBV_LOGIC_H
#define PSL_VAN_IBV_LOGIC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------- credits --
 * Each end of a queue pair posts depth receive buffers plus IBV_CR_RESERVE
 * more. A record other than CREDIT may be sent only with a credit (one of
 * the peer's depth buffers); the receiver reposts every buffer at once and
 * gives its credits back, piggybacked on its own records or, once half its
 * depth is owed, in a CREDIT record. CREDIT records take no credit: they
 * use the reserve, and at most two can be unread at the peer (each returns
 * at least half the depth, and the peer never holds more than depth), so
 * the reserve never runs dry and the peer's queue never has no buffer
 * (no receiver-not-ready retries). */
#define IBV_CR_RESERVE 4

struct ibv_credits {
	uint32_t avail;	    /* records we may send now */
	uint32_t owed;	    /* buffers we reposted, not yet given back */
	uint32_t my_depth;  /* our receive buffers (without the reserve) */
	uint32_t peer_depth;
};

void ibv_cr_init(struct ibv_credits *c, uint32_t my_depth, uint32_t peer_depth);
/* Takes one credit for a record; false when there is none. */
bool ibv_cr_take(struct ibv_credits *c);
/* The peer gave n credits back; -EPROTO when that is more than it can owe. */
int ibv_cr_grant(struct ibv_credits *c, uint32_t n);
/* A received record's buffer was reposted (a CREDIT record owes nothing). */
void ibv_cr_reposted(struct ibv_credits *c, bool credit_record);
/* Credits to piggyback on the record being sent (all owed, at most 65535). */
uint16_t ibv_cr_piggyback(struct ibv_credits *c);
/* Whether a CREDIT record should be sent now. */
bool ibv_cr_need_update(const struct ibv_credits *c);

/* ------------------------------------------------ sender's rendezvous --
 * A send is done when its record's send completed and, if it has segments
 * by rendezvous, the receiver's FIN arrived (either may come first), or at
 * its first error. ibv_sop_event returns true exactly once: when the send
 * becomes done, with *status its result. */
enum ibv_sop_ev { IBV_SOP_SENT = 1, IBV_SOP_FIN = 2, IBV_SOP_FAIL = 3 };

struct ibv_sop {
	bool need_fin, sent, fin, done;
	int status;
};

void ibv_sop_init(struct ibv_sop *s, bool need_fin);
bool ibv_sop_event(struct ibv_sop *s, int ev, int status, int *out_status);

/* ------------------------------------------------- in-order delivery --
 * Messages of one link carry consecutive sequence numbers (over all its
 * queue pairs); they are delivered in that order once complete. */
struct ibv_oq_ent {
	uint64_t seq;
	bool ready;
	struct ibv_oq_ent *next;
};

struct ibv_oq {
	uint64_t next; /* the next sequence number to deliver */
	struct ibv_oq_ent *head;
	size_t n;
};

/* -EPROTO for a sequence number already delivered or already waiting. */
int ibv_oq_insert(struct ibv_oq *q, struct ibv_oq_ent *e);
/* The next entry to deliver (removed), or NULL. */
struct ibv_oq_ent *ibv_oq_pop(struct ibv_oq *q);
/* Removes every waiting entry, in order (for teardown); NULL when empty. */
struct ibv_oq_ent *ibv_oq_take_any(struct ibv_oq *q);

/* ---------------------------------------------------- queue pair choice --
 * DMLC_SPLIT_QP_LAG gives a link several queue pairs; every message goes on
 * one of them. Round robin over the pairs that are up and could post now;
 * when none can, the one with the shortest queue. -1: none is up. */
struct ibv_qchoice {
	bool up;
	uint32_t credits; /* records it may send now */
	uint32_t slots;	  /* free send slots */
	uint32_t queued;  /* messages waiting for credits or slots */
};

int ibv_pick_qp(const struct ibv_qchoice *q, int n, unsigned *rr);

/* ---------------------------------------------------- eager or rendezvous --
 * Which segments travel in the record and which are read from the sender's
 * memory: everything inline when the record fits in cap (the peer's receive
 * buffer); otherwise the largest segments go by rendezvous until it fits,
 * and every segment of at least rndv_min does. A meta that does not fit
 * in cap with every segment out goes by rendezvous too (*meta_remote; the
 * record then has one more descriptor instead of the meta). Fills remote[];
 * returns the record's size, or -EMSGSIZE when even the descriptors do not
 * fit. */
long ibv_plan(const uint64_t *lens, uint32_t nseg, uint32_t meta_len, size_t cap,
	      uint64_t rndv_min, bool *remote, bool *meta_remote);

/* ---------------------------------------------------- registration cache --
 * Registrations keyed by address range, so that a buffer sent again (or a
 * worker's pull buffer read into again) is not registered again: the steady
 * state registers nothing. An entry in use (held) is never deregistered; past
 * max entries, unheld ones go least recently used first. A range is dropped
 * when dereg_mem names it (held entries at their last put). Thread-safe. */
typedef int (*ibv_mrc_reg_fn)(void *ctx, void *addr, size_t len, void **mr);
typedef void (*ibv_mrc_dereg_fn)(void *ctx, void *mr);
/* Optional: a fingerprint of the pages now mapped at [start, end) (the
 * van uses their page frame numbers), false when it cannot tell. An entry
 * whose fingerprint changed since it was registered (the memory was freed
 * and the addresses mapped again) is dropped and registered anew. */
typedef bool (*ibv_mrc_stamp_fn)(void *ctx, uintptr_t start, uintptr_t end, uint64_t *stamp);

struct ibv_mrc_ent {
	uintptr_t start, end;
	void *mr;
	int refs;
	bool dead, stamped;
	uint64_t used;
	uint64_t stamp;
};

struct ibv_mrc {
	pthread_mutex_t mu;
	struct ibv_mrc_ent **e; /* sorted by start */
	size_t n, cap, max;
	uint64_t clock;
	bool enabled;
	ibv_mrc_reg_fn reg;
	ibv_mrc_dereg_fn dereg;
	ibv_mrc_stamp_fn stamp;
	void *ctx;
	uint64_t hits, misses, evictions, stale;
};

int ibv_mrc_init(struct ibv_mrc *c, size_t max, bool enabled, ibv_mrc_reg_fn reg,
		 ibv_mrc_dereg_fn dereg, void *ctx);
void ibv_mrc_fini(struct ibv_mrc *c);
/* A registration covering [addr, addr+len), held until ibv_mrc_put. */
int ibv_mrc_get(struct ibv_mrc *c, const void *addr, size_t len, struct ibv_mrc_ent **out);
void ibv_mrc_put(struct ibv_mrc *c, struct ibv_mrc_ent *e);
void ibv_mrc_invalidate(struct ibv_mrc *c, const void *addr, size_t len);

#endif
