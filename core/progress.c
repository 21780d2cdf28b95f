/*
 * Caller-driven progress (PS_CALLER_PROGRESS=1, issue 29): a thread that
 * waits for a request lends itself to the van (psl_van_ops.progress) for a
 * while before it sleeps, so that the reply is received, and the request
 * completed, on that thread rather than on the van's, which would then have
 * to wake it.
 *
 * What runs on the waiting thread then: whatever the van delivers meanwhile,
 * i.e. this node's control messages and every message's user code, the KV
 * callbacks of any request and, on a node that also serves, its request
 * handlers. Hence the opt-in: a program that waits while it holds a lock that
 * its callbacks take must leave it off.
 */
#include "config.h"

#include <errno.h>
#include <time.h>

#include "clock.h"
#include "customer.h"
#include "postoffice.h"
#include "tracker.h"

/* How long a waiting caller drives before it sleeps as without the setting
 * (a large transfer: the van's thread finishes it). */
#define DRIVE_WINDOW_US 2000
/* One call into the van: it returns at once when something happened. */
#define DRIVE_CALL_US 100

__thread bool psl__driving;

static int64_t now_us(void)
{
	return psl_van_now_ns() / 1000;
}

static bool has_progress(const struct psl__office *o)
{
	const struct psl_van_ops *ops = o->lib.ops;
	return ops && ops->size >= PSL_VAN_OPS_SIZE_1_3 && ops->progress;
}

/* Whether request ts is answered (or gone): nothing left to drive for. */
static bool settled(struct psl__customer *c, int ts)
{
	struct psl__req *r;
	bool done;
	pthread_mutex_lock(&c->mu);
	r = c->ring[(uint32_t)ts & (c->cap - 1)];
	done = !r || r->ts != ts || r->state == PSL__REQ_FREE || r->state == PSL__REQ_DONE;
	pthread_mutex_unlock(&c->mu);
	return done;
}

void psl__drive(struct psl__customer *c, int ts, const struct timespec *dl)
{
	struct psl__office *o = c->office, *was = psl__cur;
	int64_t end = now_us() + DRIVE_WINDOW_US;
	int rc = 0;

	if (!o || !o->cfg.caller_progress || psl__driving || !has_progress(o))
		return;
	if (dl) {
		int64_t d = (int64_t)dl->tv_sec * 1000000 + dl->tv_nsec / 1000;
		if (d < end)
			end = d;
	}
	atomic_fetch_add(&o->drivers, 1);
	if (atomic_load(&o->drive_off) || !o->van)
		goto out;
	psl__driving = true;
	while (rc >= 0 || rc == -EBUSY) {
		if (settled(c, ts) || now_us() >= end)
			break;
		rc = o->lib.ops->progress(o->van, DRIVE_CALL_US);
	}
	psl__driving = false;
	psl__enter(was); /* the van's callbacks made their node current */
out:
	atomic_fetch_sub(&o->drivers, 1);
}

void psl__drive_stop(struct psl__office *o)
{
	atomic_store(&o->drive_off, true);
	while (atomic_load(&o->drivers) > 0) {
		struct timespec ts = {0, 100 * 1000};
		nanosleep(&ts, NULL);
	}
}
