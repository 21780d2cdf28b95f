/* The core's thread that runs work once a copy on a GPU is done, in the
 * order it was queued (cuda_after.h). One per process, started with the
 * first work and kept: it sleeps when there is none. Work queued with
 * nothing before it runs on its caller's thread when its copy is done
 * within PS_CUDA_SPIN_US (30 us): a small copy on an idle stream is done in
 * a few us, sooner than the thread wakes up (docs/gpu.md, "Who waits"). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

#include "cuda.h"
#include "cuda_after.h"
#include "postoffice.h"
#include "pslite/van_util.h"

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv, idle;
	struct psl__cuda_after *head, **tail;
	int pending; /* queued or running */
	bool busy;   /* one is running (on the thread, or on its caller's) */
	bool started;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
       NULL, &q.head, 0, false, false};

static __thread bool on_after_thread;

/* One has run: the next may. */
static void ran_locked(void)
{
	q.busy = false;
	if (--q.pending == 0)
		pthread_cond_broadcast(&q.idle);
	else if (q.head)
		pthread_cond_signal(&q.cv);
}

static void *after_main(void *arg)
{
	(void)arg;
	on_after_thread = true;
	pthread_mutex_lock(&q.mu);
	for (;;) {
		struct psl__cuda_after *a;
		while (!q.head || q.busy)
			pthread_cond_wait(&q.cv, &q.mu);
		a = q.head;
		q.head = a->next;
		if (!q.head)
			q.tail = &q.head;
		q.busy = true;
		pthread_mutex_unlock(&q.mu);
		a->run(a, psl__cuda_done_wait(a->dev, a->ev));
		pthread_mutex_lock(&q.mu);
		ran_locked();
	}
	return NULL;
}

/* The thread, detached, with signals blocked (the process's handlers run
 * on its own threads). */
static int start_locked(void)
{
	pthread_attr_t at;
	pthread_t t;
	sigset_t all, old;
	int rc;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, &at, after_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	q.started = rc == 0;
	return -rc;
}

/* True once ev is done, false if it is not within spin ns. */
static bool done_soon(void *ev, int64_t spin)
{
	int64_t end = psl_van_now_ns() + spin;
	do {
		if (psl__cuda_mark_ready(ev))
			return true;
	} while (psl_van_now_ns() < end);
	return false;
}

/* a (first in line, q.busy set for it) on the caller's thread if its copy
 * is done within spin ns; else first in the queue, for the thread. */
static void run_here(struct psl__cuda_after *a, int64_t spin)
{
	struct psl__office *o = psl__cur;
	if (done_soon(a->ev, spin)) {
		on_after_thread = true; /* (as on the thread: see psl__cuda_after_idle) */
		a->run(a, psl__cuda_done_wait(a->dev, a->ev));
		on_after_thread = false;
		psl__enter(o);
		pthread_mutex_lock(&q.mu);
		ran_locked();
		pthread_mutex_unlock(&q.mu);
		return;
	}
	pthread_mutex_lock(&q.mu);
	a->next = q.head;
	q.head = a;
	if (!a->next)
		q.tail = &a->next;
	q.busy = false;
	pthread_cond_signal(&q.cv);
	pthread_mutex_unlock(&q.mu);
}

int psl__cuda_after(struct psl__cuda_after *a)
{
	int64_t spin = a->ev ? psl__cuda_spin_ns() : 0;
	int rc = 0;
	pthread_mutex_lock(&q.mu);
	if (!q.started && (rc = start_locked())) {
		pthread_mutex_unlock(&q.mu);
		return rc;
	}
	q.pending++;
	if (spin > 0 && !q.head && !q.busy && !on_after_thread) {
		/* nothing before it: its caller waits a little, then hands over */
		q.busy = true;
		pthread_mutex_unlock(&q.mu);
		run_here(a, spin);
		return 0;
	}
	a->next = NULL;
	*q.tail = a;
	q.tail = &a->next;
	pthread_cond_signal(&q.cv);
	pthread_mutex_unlock(&q.mu);
	return 0;
}

bool psl__cuda_after_here(void)
{
	return on_after_thread;
}

void psl__cuda_after_idle(void)
{
	if (on_after_thread)
		return; /* (its own work: the caller's turn comes after) */
	pthread_mutex_lock(&q.mu);
	while (q.pending)
		pthread_cond_wait(&q.idle, &q.mu);
	pthread_mutex_unlock(&q.mu);
}
