/* The core's thread that runs work once a copy on a GPU is done, in the
 * order it was queued (cuda_after.h). One per process, started with the
 * first work and kept: it sleeps when there is none. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

#include "cuda.h"
#include "cuda_after.h"

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv, idle;
	struct psl__cuda_after *head, **tail;
	int pending; /* queued or running */
	bool started;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
       NULL, &q.head, 0, false};

static __thread bool on_after_thread;

static void *after_main(void *arg)
{
	(void)arg;
	on_after_thread = true;
	pthread_mutex_lock(&q.mu);
	for (;;) {
		struct psl__cuda_after *a;
		while (!q.head)
			pthread_cond_wait(&q.cv, &q.mu);
		a = q.head;
		q.head = a->next;
		if (!q.head)
			q.tail = &q.head;
		pthread_mutex_unlock(&q.mu);
		a->run(a, psl__cuda_done_wait(a->dev, a->ev));
		pthread_mutex_lock(&q.mu);
		if (--q.pending == 0)
			pthread_cond_broadcast(&q.idle);
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

int psl__cuda_after(struct psl__cuda_after *a)
{
	int rc = 0;
	pthread_mutex_lock(&q.mu);
	if (!q.started && (rc = start_locked())) {
		pthread_mutex_unlock(&q.mu);
		return rc;
	}
	a->next = NULL;
	q.pending++;
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
