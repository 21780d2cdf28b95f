/* Shared between the control plane's files (control.c, registration.c,
 * barrier.c, heartbeat.c, timer.c); not used elsewhere in the core. */
#ifndef PSL_CORE_CONTROL_INT_H
#define PSL_CORE_CONTROL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "message.h"
#include "postoffice.h"

/* Opens the van's connection to node n (logs a failure). */
int psl__control_connect(struct psl__office *o, const struct psl__node *n, int my_id);
/* Start-up failed with err (the first failure is kept, start() returns it);
 * _held: for a caller that holds o->mu. */
void psl__start_failed(struct psl__office *o, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void psl__start_failed_held(struct psl__office *o, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Scheduler: tells a ghost at n's address (a node declared lost that still
 * runs) to stop, and why, as the job's abort does (PSL__ABORT_TAG), under
 * an id of its own; once per address: false if it was told before
 * (refuse.c). */
bool psl__tell_ghost(struct psl__office *o, const struct psl__node *n, const char *why);

/* The body of the TERMINATE a scheduler sends a node whose registration it
 * ignored, before the reason (registration.c; docs/wire.md). */
#define PSL__REFUSED_TAG "pslite-refused: "

/* The body of the TERMINATE a scheduler sends the nodes of a job it gives
 * up on (a message they wait for cannot be delivered, its start failed),
 * before "<negative errno>: <reason>" (control_fail.c; docs/wire.md 5). */
#define PSL__ABORT_TAG "pslite-abort: "

/* One control message sent, as psl__control_sent hears of it. */
struct psl__ctl_sent {
	int cmd;
	int recver;
	int group;     /* barrier_group */
	int node_size; /* node entries */
	bool request;
	size_t len;    /* bytes of the meta */
	bool van_said; /* the van logged an ERROR since (its last one says why) */
};
/* Every control message's send ends here, from any thread, once: status 0
 * or the -errno of the send or of its send_done. A failure is logged at
 * ERROR naming the peer, the message and the reason, and acted on: the
 * scheduler's start fails (node list), the node that waits for it is told
 * and declared lost, a node's start or barrier fails (control_fail.c). */
void psl__control_sent(struct psl__office *o, const struct psl__ctl_sent *s, int status);
/* Scheduler: tells every node it has a connection to (under the node's id)
 * that the job stops, and why, with a TERMINATE (PSL__ABORT_TAG). */
void psl__control_abort_nodes(struct psl__office *o, int err, const char *why);
/* Scheduler, from the timer: tells the nodes that a control message could
 * not reach, and declares them lost. */
void psl__control_undeliv_tick(struct psl__office *o);
/* Node: a TERMINATE from the scheduler with PSL__ABORT_TAG. */
void psl__control_take_abort(struct psl__office *o, const struct psl__meta *m);

/* Recovery (recovery.c). Scheduler: with PS_RECOVERY=1, registration n
 * takes the place of a lost node of its role (true), or there is none
 * (false). Node: the scheduler's ADD_NODE after start-up (recovered nodes). */
bool psl__recovery_take(struct psl__office *o, const struct psl__node *n);
void psl__recovery_news(struct psl__office *o, const struct psl__meta *m);
/* Scheduler, from the timer: refuses the newcomers that waited too long
 * for a lost node to replace. */
void psl__recovery_tick(struct psl__office *o, int64_t now);
/* Node, PS_RESEND with PS_RECOVERY (recovery_resend.c): whether the requests
 * in flight to lost node id wait for its replacement; holds them; sends them
 * to the replacement, now connected; fails them after the bound (timer). */
bool psl__recovery_holds(struct psl__office *o, int id);
void psl__recovery_hold(struct psl__office *o, int id, int err);
void psl__recovery_resend(struct psl__office *o, int id);
void psl__recovery_hold_tick(struct psl__office *o, int64_t now);
/* Scheduler: node id's heartbeat arrived; a C++ newcomer's first one sends
 * the others its news (recovery.c). */
void psl__recovery_heard(struct psl__office *o, int id);
/* Forgets the newcomers waiting for a place (the scheduler's state reset). */
void psl__recovery_reset(struct psl__office *o);
/* Scheduler: tells node n that its registration was refused, and why
 * (refuse.c). */
void psl__tell_refused(struct psl__office *o, const struct psl__node *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Scheduler: the PS_JOB_SECRET nonce of registered node n, or NULL; with
 * o->mu held, keeps the nonce of n's registration (a node started again at
 * the same address brings a new one) (refuse.c). */
const char *psl__registration_nonce(const struct psl__node *n);
void psl__registration_keep_nonce(const struct psl__node *n, const char *nonce);
/* Forgets the addresses told so far (the scheduler's state reset). */
void psl__refusals_reset(void);

/* Received control messages, by kind. */
void psl__scheduler_add_node(struct psl__office *o, const struct psl__meta *m);
void psl__node_take_list(struct psl__office *o, const struct psl__meta *m);
void psl__handle_barrier(struct psl__office *o, const struct psl__meta *m);
void psl__handle_heartbeat(struct psl__office *o, const struct psl__meta *m);
/* A node's registration body: appends its heartbeat promise (heartbeat.c). */
void psl__heartbeat_promise(struct psl__office *o, char *body, size_t len);
/* Scheduler: the heartbeat interval a registration promised, 0 if none. */
int psl__heartbeat_promised(const struct psl__meta *m);

/* Scheduler, from the timer: says which nodes a barrier that has waited
 * PS_BARRIER_WARN_S seconds still waits for (barrier.c); its state reset. */
void psl__barrier_watch(struct psl__office *o, int64_t now);
void psl__barrier_reset(void);
/* Forgets the registrations refused so far (registration.c). */
void psl__registration_reset(void);

/* The timer's heartbeat work (heartbeat.c). */
void psl__heartbeat_tick(struct psl__office *o, int64_t now, int64_t *last_hb);

#endif
