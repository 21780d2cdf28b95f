/*
 * van_ibverbs: the progress thread, and caller-driven progress
 * (psl_van_ops.progress, ABI 1.3; the core calls it with PS_CALLER_PROGRESS=1).
 *
 * Whoever holds rx_mu polls the completion queues and runs the host
 * callbacks of what came (ibv_flush_events), so that messages reach the
 * host in order and only one thread at a time frees queue pairs and streams
 * (ibv_xfer.c and ibv_recv.c count on that; the van's lock, mu, is dropped
 * in the middle of a poll to ask the host for a buffer). The progress thread
 * holds rx_mu while it works (completions, rdmacm events, timers) and lets go
 * only while it sleeps or yields. A thread that waits for a reply takes
 * rx_mu by trylock and polls the queues itself: the reply is handed to the
 * host on that thread, with no wake-up of the progress thread and no
 * hand-off back. Sends were posted by the caller's thread already (vsend),
 * so with both a request's whole round trip on the worker's side runs on
 * the waiting thread. Nobody but the progress thread and fini ever waits
 * for rx_mu.
 *
 * Meanwhile the progress thread steps aside: while callers came in the last
 * IBV_ASIDE_US it neither arms the completion queues nor watches the
 * completion channel (it would wake for the very completion the caller
 * takes, then wait for rx_mu), and sleeps for at most the rest of that
 * window. The rdmacm channel, the eventfd and the timers still wake it, so
 * connections, losses and retries stay on it alone; once callers stopped
 * coming it polls, arms and watches the channel as before, so that nothing
 * waits longer than the window.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "ibv.h"

#define IBV_ASIDE_US 1000

/* The van whose queues this thread polls now (the progress thread: always):
 * a host callback of that round that waits must not poll again. */
static __thread struct psl_van *owner;

/* One round of polling and callbacks; rx_mu held, mu not. */
static int poll_round(struct psl_van *v)
{
	int n;
	pthread_mutex_lock(&v->mu);
	n = ibv_poll_all(v);
	pthread_mutex_unlock(&v->mu);
	ibv_flush_events(v);
	return n;
}

/* ------------------------------------------------------ caller-driven -- */

static int drive_once(struct psl_van *v)
{
	struct psl_van *was = owner;
	int rc;
	if (pthread_mutex_trylock(&v->rx_mu))
		return -EBUSY;
	if (atomic_load(&v->stop)) {
		rc = -ESHUTDOWN;
	} else {
		owner = v;
		rc = poll_round(v) > 0;
		owner = was;
	}
	pthread_mutex_unlock(&v->rx_mu);
	return rc;
}

int ibv_drive(struct psl_van *v, int timeout_us)
{
	int64_t now = psl_van_now_ns();
	int64_t end = now + (int64_t)(timeout_us > 0 ? timeout_us : 0) * 1000;

	if (owner == v)
		return -EDEADLK;
	if (atomic_load(&v->stop))
		return -ESHUTDOWN;
	atomic_store(&v->driven_until, now + (int64_t)IBV_ASIDE_US * 1000);
	return psl_van_drive_loop(v, end, drive_once);
}

/* Whether callers drove in the last IBV_ASIDE_US, with *tmo (ms, -1: none)
 * capped to the rest of their window. */
static bool aside(struct psl_van *v, int *tmo)
{
	int64_t left = atomic_load(&v->driven_until) - psl_van_now_ns();
	int cap;
	if (left <= 0)
		return false;
	cap = (int)((left + 999999) / 1000000);
	if (*tmo < 0 || *tmo > cap)
		*tmo = cap;
	return true;
}

/* ------------------------------------------------------ progress thread -- */

static void drain_comp(struct psl_van *v)
{
	struct ibv_cq *cq;
	void *ctx;
	while (v->comp && ibv_get_cq_event(v->comp, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
}

static void cm_round(struct psl_van *v)
{
	pthread_mutex_lock(&v->mu);
	ibv_cm_event(v);
	pthread_mutex_unlock(&v->mu);
	ibv_flush_events(v);
}

/* Sleeps in poll() up to tmo ms without rx_mu, on the rdmacm channel, the
 * eventfd and, unless aside, the completion channel; handles what woke it. */
static void sleep_on(struct psl_van *v, int tmo, bool with_comp)
{
	struct pollfd pf[3];
	int np = 0, n;

	pf[np++] = (struct pollfd){.fd = v->ch->fd, .events = POLLIN};
	pf[np++] = (struct pollfd){.fd = v->wake_fd, .events = POLLIN};
	if (with_comp && v->comp)
		pf[np++] = (struct pollfd){.fd = v->comp->fd, .events = POLLIN};
	pthread_mutex_unlock(&v->rx_mu);
	n = poll(pf, (nfds_t)np, tmo);
	pthread_mutex_lock(&v->rx_mu);
	if (n <= 0)
		return;
	if (pf[1].revents) {
		uint64_t x;
		if (read(v->wake_fd, &x, sizeof(x)) < 0) {
			/* nothing to read: fine */
		}
	}
	if (np > 2 && pf[2].revents)
		drain_comp(v);
	if (pf[0].revents)
		cm_round(v);
}

/* PS_BUSY_POLL's window: the CPU (and rx_mu) given away between polls. */
static bool spin_yield(struct psl_van *v, struct psl_van_spin *spin)
{
	bool ok;
	pthread_mutex_unlock(&v->rx_mu);
	ok = psl_van_spin_yield(spin);
	pthread_mutex_lock(&v->rx_mu);
	return ok;
}

/* Arms every queue and polls once more before sleeping on the channel:
 * what completed meanwhile (> 0) is handled now instead. */
static int arm_and_poll(struct psl_van *v)
{
	int n;
	pthread_mutex_lock(&v->mu);
	ibv_arm_all(v);
	n = ibv_poll_all(v);
	pthread_mutex_unlock(&v->mu);
	if (n > 0)
		ibv_flush_events(v);
	return n;
}

void *ibv_progress_main(void *arg)
{
	struct psl_van *v = arg;
	struct psl_van_spin spin;
	int n, tmo;

	owner = v;
	psl_van_spin_init(&spin, v->busy_poll ? v->spin_ns : 0);
	pthread_mutex_lock(&v->rx_mu); /* let go only to sleep or yield */
	while (!atomic_load(&v->stop)) {
		pthread_mutex_lock(&v->mu);
		n = ibv_poll_all(v);
		tmo = ibv_conn_timers(v, psl_van_now_ms());
		pthread_mutex_unlock(&v->mu);
		ibv_flush_events(v);
		if (n > 0) {
			psl_van_spin_hit(&spin, psl_van_now_ns());
			continue;
		}
		if (aside(v, &tmo)) {
			sleep_on(v, tmo, false); /* callers poll the queues */
			continue;
		}
		if (psl_van_spinning(&spin, psl_van_now_ns()) && spin_yield(v, &spin)) {
			cm_round(v);
			continue;
		}
		if (arm_and_poll(v) > 0) {
			psl_van_spin_hit(&spin, psl_van_now_ns());
			continue;
		}
		sleep_on(v, tmo, true);
	}
	pthread_mutex_unlock(&v->rx_mu);
	owner = NULL;
	psl_van_spin_report(v->host, VAN, &spin);
	return NULL;
}
