/* Shared between the control plane's files (control.c, registration.c,
 * barrier.c, heartbeat.c, timer.c); not used elsewhere in the core. */
#ifndef PSL_CORE_CONTROL_INT_H
#define PSL_CORE_CONTROL_INT_H

#include <stdint.h>

#include "message.h"
#include "postoffice.h"

/* Opens the van's connection to node n (logs a failure). */
int psl__control_connect(const struct psl__node *n, int my_id);
/* Start-up failed with err (the first failure is kept, start() returns it);
 * _held: for a caller that holds psl__po.mu. */
void psl__start_failed(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void psl__start_failed_held(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The body of the TERMINATE a scheduler sends a node whose registration it
 * ignored, before the reason (registration.c; docs/wire.md). */
#define PSL__REFUSED_TAG "pslite-refused: "

/* Received control messages, by kind. */
void psl__scheduler_add_node(const struct psl__meta *m);
void psl__node_take_list(const struct psl__meta *m);
void psl__handle_barrier(const struct psl__meta *m);
void psl__handle_heartbeat(const struct psl__meta *m);

/* Scheduler, from the timer: says which nodes a barrier that has waited
 * PS_BARRIER_WARN_S seconds still waits for (barrier.c); its state reset. */
void psl__barrier_watch(int64_t now);
void psl__barrier_reset(void);
/* Forgets the registrations refused so far (registration.c). */
void psl__registration_reset(void);

/* The timer's heartbeat work (heartbeat.c). */
void psl__heartbeat_tick(int64_t now, int64_t *last_hb);

#endif
