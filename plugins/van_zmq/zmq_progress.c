/*
 * van_zmq: caller-driven progress (psl_van_ops.progress, ABI 1.3; the core
 * calls it with PS_CALLER_PROGRESS=1).
 *
 * A ZeroMQ socket must be used by one thread at a time. The ROUTER (where
 * every answer from a pslite node arrives) is read by whoever holds rx_mu:
 * the receive thread takes it by trylock for each drain and never holds it
 * while it sleeps; a thread that waits for an answer takes it by trylock and
 * reads the ROUTER itself, sleeping meanwhile in poll(2) on the ROUTER's
 * ZMQ_FD with rx_mu held. The answer then reaches host->recv on the waiting
 * thread: the receive thread neither wakes for it nor hands it over. The
 * DEALERs (a C++ ps-lite server answers on them), the monitors, new and lost
 * peers stay with the receive thread.
 *
 * ZMQ_FD tells only of commands that reached the socket since it was last
 * drained: whoever reads the ROUTER reads it until EAGAIN before it sleeps
 * on that fd. A caller that stops at ZV_DRAIN_MAX raises router_look and
 * wakes the receive thread, which reads the rest once no caller holds it.
 *
 * While callers came in the last ASIDE_NS (after their call's end), the
 * receive thread leaves the ROUTER's fd out of its poll set (else it would
 * wake for the very answer a caller reads, then find rx_mu taken) and caps
 * its sleep to the rest of that window; when the window ends it reads the
 * ROUTER once without waiting (a caller may have spent the fd's signal), so
 * that nothing waits for a caller that went away longer than the window.
 */

#define _GNU_SOURCE 1
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <time.h>

#include <pslite/van_util.h>

#include "zmq_van.h"

/* How long the receive thread leaves the ROUTER to callers after a call
 * ends (van.h: a millisecond or so). The core calls again at once while it
 * waits, and a program's next request comes within tens of microseconds in
 * a loop. While callers come, the receive thread wakes once per window to
 * look (a shorter one woke it every few requests); an answer that comes
 * after a caller stopped driving (a transfer that outlasts the core's 2 ms)
 * may wait up to this long. */
#define ASIDE_NS 1000000

/* The van whose callbacks run on this thread now (the receive thread:
 * always): a callback that waits must not drive inside them. */
__thread struct psl_van *zv_reading;

/* One pass, rx_mu held: reads what the ROUTER holds, and if nothing, sleeps
 * up to wait_ns on its ZMQ_FD and reads again; when the last drain ended
 * with EAGAIN (router_clean), the fd tells of anything new, and the first
 * read (two system calls in libzmq) is left out. Returns how many it read. */
static int drive_once(struct psl_van *v, int64_t wait_ns)
{
	struct pollfd pf = {v->router_fd, POLLIN, 0};
	struct timespec ts = {wait_ns / 1000000000, wait_ns % 1000000000};
	int n = v->router_clean ? 0 : zv_drain_router(v);

	if (!n && wait_ns > 0 && ppoll(&pf, 1, &ts, NULL) > 0)
		n = zv_drain_router(v);
	else if (!n && v->router_clean && wait_ns <= 0)
		n = zv_drain_router(v); /* (one pass: look without waiting) */
	if (n == ZV_DRAIN_MAX) { /* more may wait: the receive thread reads it */
		atomic_store(&v->router_look, true);
		zv_wake(v);
	}
	return n;
}

int zv_progress(struct psl_van *v, int timeout_us)
{
	int64_t now = psl_van_now_ns();
	int64_t end = now + (int64_t)(timeout_us > 0 ? timeout_us : 0) * 1000;
	int rc;

	if (zv_reading == v)
		return -EDEADLK; /* from one of our callbacks: a round inside a round */
	if (atomic_load(&v->stop))
		return -ESHUTDOWN;
	if (!atomic_load(&v->bound))
		return -ENOTCONN;
	atomic_store(&v->aside_until, end + ASIDE_NS); /* the receive thread steps aside */
	for (;;) {
		if (!pthread_mutex_trylock(&v->rx_mu)) {
			if (atomic_load(&v->stop)) {
				rc = -ESHUTDOWN; /* (fini waits for this pass) */
			} else {
				zv_reading = v;
				rc = drive_once(v, end > now ? end - now : 0);
				zv_reading = NULL;
			}
			pthread_mutex_unlock(&v->rx_mu);
		} else {
			rc = -EBUSY; /* another caller reads */
			sched_yield();
		}
		now = psl_van_now_ns();
		if ((rc != 0 && rc != -EBUSY) || now >= end)
			return rc;
	}
}

/* (Receive thread) Whether callers read the ROUTER now: then *timeout_ms
 * (-1: none) is capped to the rest of their window. When the window ended,
 * *look is set: the ROUTER is read once without waiting. */
bool zv_aside(struct psl_van *v, int *timeout_ms, bool *look)
{
	int64_t until = atomic_load(&v->aside_until), left;

	if (!until && !v->aside) /* no caller ever drove (the default) */
		return false;
	left = until - psl_van_now_ns();
	if (left > 0) {
		int cap = (int)((left + 999999) / 1000000);
		if (*timeout_ms < 0 || *timeout_ms > cap)
			*timeout_ms = cap;
		v->aside = true;
		return true;
	}
	if (v->aside) {
		v->aside = false;
		*look = true;
	}
	return false;
}
