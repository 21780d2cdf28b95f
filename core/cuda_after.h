/* Work that must wait for a copy of the core's on a GPU, run in the order
 * it was queued, on one thread of the core's (cuda_after.c): the sends of a
 * KV worker's z-form push, and a server's z-form response, from GPU memory
 * once their data is ready (their callers do not wait for it). */
#ifndef PSL_CORE_CUDA_AFTER_H
#define PSL_CORE_CUDA_AFTER_H

#include <stdbool.h>

struct psl__cuda_after {
	struct psl__cuda_after *next; /* (the queue's) */
	int dev;		      /* the device of ev */
	void *ev; /* the copy's completion (psl__cuda_copy_out), a mark, or NULL */
	/* run on that thread once ev is done (or at once for NULL): err 0, or
	 * the -errno of a failed copy (logged); ev has been given back */
	void (*run)(struct psl__cuda_after *a, int err);
};

/* Queues a (its thread is started on first use), or, when nothing is
 * queued or running and a->ev is done within PS_CUDA_SPIN_US, runs it on
 * the caller's thread before returning: the caller holds no lock that run
 * takes. 0, or -errno when that thread cannot be started (a not queued). */
int psl__cuda_after(struct psl__cuda_after *a);
/* Until all the work queued so far has run (at once on that thread). */
void psl__cuda_after_idle(void);
/* True on that thread, and on a caller's while it runs a there. */
bool psl__cuda_after_here(void);

#endif
