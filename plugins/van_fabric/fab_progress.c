/*
 * van_fabric: the progress thread, and caller-driven progress
 * (psl_van_ops.progress, ABI 1.3; the core calls it with PS_CALLER_PROGRESS=1).
 *
 * Whoever holds cq_mu reads the CQ. The progress thread holds it while it
 * works (the CQ, the bootstrap sockets, the timers: all that touches the
 * streams, the posted header receives and the orphans) and lets go only
 * while it sleeps or yields. A thread that waits for a reply takes cq_mu by
 * trylock and reads the CQ itself (over tcp that also moves the provider's
 * sockets): the reply is handed to the host on that thread, with no wake-up
 * of the progress thread and no hand-off back. Nobody else ever waits for
 * cq_mu but the progress thread and fini.
 *
 * Meanwhile the progress thread steps aside: while callers came in the last
 * FAB_ASIDE_US it sleeps with the CQ's wait fd out of its epoll set (else it
 * would wake for the very completion the caller reads, then wait for cq_mu),
 * for at most the rest of that window. It still wakes for the eventfd (a
 * queue waiting for the provider, a new or lost peer), the bootstrap sockets
 * and its timers, so connection set-up, hellos, losses and retries stay on
 * it alone; once callers stopped coming it reads the CQ as before and puts
 * the fd back, so that nothing waits longer than the window.
 */

#define _GNU_SOURCE 1
#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include "fabric.h"

#define FAB_ASIDE_US 1000

/* The van whose CQ this thread reads now (the progress thread: always): a
 * host callback from that round that waits must not drive again. */
static __thread struct psl_van *owner;

/* ------------------------------------------------------ caller-driven -- */

static int drive_once(struct psl_van *v)
{
	int rc;
	if (pthread_mutex_trylock(&v->cq_mu))
		return -EBUSY;
	if (atomic_load(&v->stop)) {
		rc = -ESHUTDOWN;
	} else {
		owner = v;
		rc = fab_drain_cq(v) > 0;
		owner = NULL;
	}
	pthread_mutex_unlock(&v->cq_mu);
	return rc;
}

int fab_drive(struct psl_van *v, int timeout_us)
{
	int64_t now = psl_van_now_ns();
	int64_t end = now + (int64_t)(timeout_us > 0 ? timeout_us : 0) * 1000;

	if (owner == v)
		return -EDEADLK;
	if (atomic_load(&v->stop) || atomic_load(&v->closing))
		return -ESHUTDOWN;
	if (!atomic_load(&v->bound))
		return -ENOTCONN;
	atomic_store(&v->driven_until, now + (int64_t)FAB_ASIDE_US * 1000);
	return psl_van_drive_loop(v, end, drive_once);
}

/* Whether the progress thread sleeps aside (callers read the CQ), with
 * *timeout (ms, -1: none) capped to the rest of their window. */
static bool aside(struct psl_van *v, int *timeout)
{
	int64_t left = atomic_load(&v->driven_until) - psl_van_now_ns();
	if (left > 0) {
		int cap = (int)((left + 999999) / 1000000);
		if (v->cq_fd >= 0 && !v->cq_off && !epoll_ctl(v->epfd, EPOLL_CTL_DEL, v->cq_fd, NULL))
			v->cq_off = true;
		if (v->cq_fd >= 0 && !v->cq_off)
			return false; /* (cannot take it out: wait on it as usual) */
		if (*timeout < 0 || *timeout > cap)
			*timeout = cap;
		return true;
	}
	if (v->cq_off && !fab_ep_add(v, &v->cqc, EPOLLIN))
		v->cq_off = false;
	if (!v->cq_off)
		return false;
	if (*timeout < 0 || *timeout > 1) /* cannot wait on it: poll every ms */
		*timeout = 1;
	return true;
}

/* ------------------------------------------------------ progress thread -- */

/* Between two polls of PS_BUSY_POLL's window: let go of the CQ (callers read
 * it meanwhile) and of the CPU. False when the CPU came back late. */
static bool spin_yield(struct psl_van *v, struct psl_van_spin *spin)
{
	bool ok;
	pthread_mutex_unlock(&v->cq_mu);
	ok = psl_van_spin_yield(spin);
	pthread_mutex_lock(&v->cq_mu);
	return ok;
}

static void on_events(struct psl_van *v, struct epoll_event *evs, int n, bool *hk)
{
	int i;
	for (i = 0; i < n; i++) {
		struct fab_conn *c = evs[i].data.ptr;
		*hk = *hk || c->type != CONN_CQ;
		switch (c->type) {
		case CONN_WAKE: {
			uint64_t x;
			ssize_t r = read(c->fd, &x, sizeof(x));
			(void)r;
			break;
		}
		case CONN_CQ:
			break; /* drained at the top */
		case CONN_LISTEN:
			fab_on_accept(v);
			break;
		case CONN_OUT:
			fab_peer_io(v, c->owner, evs[i].events);
			break;
		case CONN_IN:
			fab_stream_io(v, c->owner, evs[i].events);
			break;
		}
	}
}

void *fab_progress_main(void *arg)
{
	struct psl_van *v = arg;
	struct epoll_event evs[32];
	struct psl_van_spin spin;
	struct psl_van_spin_auto pa;
	unsigned rounds = 0;
	int idle = 0;
	bool hk = true;	 /* peers and streams need a look */
	int64_t hk_at = 0; /* and when they need one next */

	owner = v;
	psl_van_spin_auto_init(&spin, &pa, v->busy_poll ? (v->poll_auto ? 2 : 1) : 0, v->spin_ns);
	pthread_mutex_lock(&v->cq_mu); /* let go only to sleep or yield */
	while (!atomic_load(&v->stop)) {
		int n, timeout, got;
		int64_t now;
		got = fab_drain_cq(v);
		now = psl_van_now_ms();
		/* timers, new peers, queues waiting for the provider: not on every
		 * completion */
		if (hk || now >= hk_at || atomic_load(&v->retry)) {
			atomic_store(&v->retry, 0);
			hk_at = now + fab_housekeeping(v);
			hk = false;
		}
		timeout = (int)(hk_at - now);
		if (got || atomic_load(&v->retry)) {
			idle = 0;
			timeout = 0;
			if (got)
				psl_van_spin_auto_hit(&spin, &pa, psl_van_now_ns());
		}
		if (timeout != 0 && aside(v, &timeout)) {
			/* callers read the CQ: sleep without its fd */
		} else if (timeout != 0 && psl_van_spin_auto_spinning(&spin, &pa, psl_van_now_ns()) &&
			   spin_yield(v, &spin)) {
			/* PS_BUSY_POLL's window: the CQ again soon, the CPU to whoever
			 * needs it meanwhile (on a small machine, the peer that
			 * answers; a late return ended the window); the sockets
			 * every 64th round */
			if (++rounds & 63)
				continue;
			timeout = 0;
		} else if (timeout != 0 && v->cq_fd >= 0) {
			struct fid *f = &v->cq->fid;
			int rc;
			EP_LOCK(v);
			rc = fi_trywait(v->fabric, &f, 1);
			EP_UNLOCK(v);
			if (rc == -FI_EAGAIN)
				timeout = 0;
		} else if (timeout != 0) {
			/* no wait object: poll, sleeping a little once idle */
			if (++idle < 200)
				timeout = 0;
			else if (timeout < 0 || timeout > 1)
				timeout = 1;
		}
		pthread_mutex_unlock(&v->cq_mu);
		n = epoll_wait(v->epfd, evs, 32, timeout);
		pthread_mutex_lock(&v->cq_mu);
		on_events(v, evs, n, &hk);
	}
	pthread_mutex_unlock(&v->cq_mu);
	owner = NULL;
	psl_van_spin_report(v->host, "van_fabric", &spin);
	psl_van_spin_auto_report(v->host, "van_fabric", &pa);
	return NULL;
}
