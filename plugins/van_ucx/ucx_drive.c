/*
 * van_ucx: caller-driven progress (psl_van_ops.progress, ABI 1.3).
 *
 * A thread that waits for a reply takes the worker (ucx_mu, by trylock:
 * nobody but the progress thread and fini ever waits for it) and runs the
 * same round as the progress thread: posting the inbox, ucp_worker_progress,
 * then the host's callbacks for what arrived. The reply is then delivered
 * on the waiting thread, with no wake-up of the progress thread and no
 * hand-off back.
 *
 * Meanwhile the progress thread steps aside: while callers came in the last
 * UCX_ASIDE_US, it sleeps with the worker's event fd out of its epoll set
 * and the worker unarmed (an armed worker would wake it for the very
 * arrival the caller takes), for at most the rest of that window. It still
 * wakes for the inbox (senders that found the worker taken), the bootstrap
 * sockets and its timers; once callers stopped coming, it puts the event fd
 * back and arms the worker, so that nothing waits longer than the window
 * for a caller that went away.
 */

#define _GNU_SOURCE 1
#include <errno.h>
#include <sys/epoll.h>

#include "ucx_van.h"

#define UCX_ASIDE_US 1000

/* Set while this thread drives a van: a wait inside a host callback that
 * this drive made must not drive again (the round is not re-entrant). */
static __thread bool driving;

static int drive_once(struct psl_van *v)
{
	int rc;
	if (pthread_mutex_trylock(&v->ucx_mu))
		return -EBUSY;
	if (v->in_round) /* this thread is the worker's owner, in a host callback */
		rc = -EDEADLK;
	else if (!v->running || v->stopping)
		rc = -ESHUTDOWN;
	else
		rc = psl__ucx_progress_once(v) ? 1 : 0;
	pthread_mutex_unlock(&v->ucx_mu);
	return rc;
}

int psl__ucx_drive(struct psl_van *v, int timeout_us)
{
	int64_t now = psl_van_now_ns(), end = now + (int64_t)(timeout_us > 0 ? timeout_us : 0) * 1000;
	int rc;

	if (driving)
		return -EDEADLK;
	if (atomic_load(&v->stop))
		return -ESHUTDOWN;
	atomic_store(&v->driven_until, now + (int64_t)UCX_ASIDE_US * 1000);
	driving = true;
	rc = psl_van_drive_loop(v, end, drive_once);
	driving = false;
	return rc;
}

bool psl__ucx_aside(struct psl_van *v, long *us)
{
	int64_t left = atomic_load(&v->driven_until) - psl_van_now_ns();
	if (left > 0) {
		long cap = (long)(left / 1000) + 1;
		if (!v->efd_off && !epoll_ctl(v->epfd, EPOLL_CTL_DEL, v->efd, NULL))
			v->efd_off = true;
		if (v->efd_off) {
			if (*us < 0 || *us > cap)
				*us = cap;
			return true;
		}
		return false; /* (cannot take it out: arm as usual) */
	}
	if (v->efd_off) {
		struct epoll_event e = {.events = EPOLLIN, .data.ptr = &v->h_worker};
		if (!epoll_ctl(v->epfd, EPOLL_CTL_ADD, v->efd, &e))
			v->efd_off = false;
		else /* cannot wait on it: poll every window instead */
			*us = (*us < 0 || *us > UCX_ASIDE_US) ? UCX_ASIDE_US : *us;
	}
	return v->efd_off;
}
