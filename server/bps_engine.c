/* Engine threads: each blocks on its own queue and runs the jobs put there. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "bps_engine.h"
#include "log.h"
#include "pslite.h"

void psl__bps_queue_init(struct psl__bps_queue *q, bool schedule)
{
	q->head = NULL;
	q->tail = &q->head;
	q->len = 0;
	q->seq = 0;
	q->schedule = schedule;
}

void psl__bps_queue_push(struct psl__bps_queue *q, struct psl__bps_job *job)
{
	job->next = NULL;
	job->seq = q->seq++;
	if (job->cnt)
		*job->cnt = job->reset_cnt ? 0 : *job->cnt + 1;
	*q->tail = job;
	q->tail = &job->next;
	q->len++;
}

static uint64_t count_of(const struct psl__bps_job *j)
{
	return j->cnt ? *j->cnt : 0;
}

struct psl__bps_job *psl__bps_queue_pop(struct psl__bps_queue *q)
{
	struct psl__bps_job **best = &q->head, **pp, *j;

	if (!q->head)
		return NULL;
	if (q->schedule) {
		/* counts change while jobs wait, so no heap: a scan of the queue,
		 * which holds a few jobs per key */
		for (pp = &q->head->next; *pp; pp = &(*pp)->next) {
			uint64_t c = count_of(*pp), b = count_of(*best);
			if (c < b || (c == b && (*pp)->seq < (*best)->seq))
				best = pp;
		}
	}
	j = *best;
	*best = j->next;
	if (q->tail == &j->next)
		q->tail = best;
	j->next = NULL;
	q->len--;
	return j;
}

struct thread {
	struct psl__bps_engine *e;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;   /* a job arrived, or stop */
	pthread_cond_t idle; /* the queue ran empty */
	struct psl__bps_queue q;
	bool running; /* a job is being run */
	bool stop;
	bool started;
	uint64_t load;
};

struct psl__bps_engine {
	int n;
	psl__bps_run_fn run;
	void *arg;
	pthread_mutex_t load_mu;
	struct thread *t;
};

static void *thread_main(void *arg)
{
	struct thread *t = arg;
	struct psl__bps_job *job;

	pthread_mutex_lock(&t->mu);
	for (;;) {
		while (!t->q.head && !t->stop)
			pthread_cond_wait(&t->cv, &t->mu);
		job = psl__bps_queue_pop(&t->q);
		if (!job)
			break; /* stop, and nothing left */
		t->running = true;
		pthread_mutex_unlock(&t->mu);
		t->e->run(job, t->e->arg);
		pthread_mutex_lock(&t->mu);
		t->running = false;
		if (!t->q.head)
			pthread_cond_broadcast(&t->idle);
	}
	pthread_cond_broadcast(&t->idle);
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

int psl__bps_engine_new(int nthreads, bool schedule, psl__bps_run_fn run, void *arg,
			struct psl__bps_engine **out)
{
	struct psl__bps_engine *e;
	int i, rc;

	if (nthreads < 1 || !run || !out)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->t = calloc((size_t)nthreads, sizeof(*e->t));
	if (!e->t) {
		free(e);
		return -ENOMEM;
	}
	e->n = nthreads;
	e->run = run;
	e->arg = arg;
	pthread_mutex_init(&e->load_mu, NULL);
	for (i = 0; i < nthreads; i++) {
		struct thread *t = &e->t[i];
		t->e = e;
		pthread_mutex_init(&t->mu, NULL);
		pthread_cond_init(&t->cv, NULL);
		pthread_cond_init(&t->idle, NULL);
		psl__bps_queue_init(&t->q, schedule);
		rc = pthread_create(&t->th, NULL, thread_main, t);
		if (rc) {
			PSL_ERR("pslite-server: cannot start engine thread %d: %s", i,
				psl_strerror(-rc));
			psl__bps_engine_free(e);
			return -rc;
		}
		t->started = true;
	}
	*out = e;
	return 0;
}

void psl__bps_engine_free(struct psl__bps_engine *e)
{
	int i;
	if (!e)
		return;
	for (i = 0; i < e->n; i++) {
		struct thread *t = &e->t[i];
		if (!t->started)
			continue;
		pthread_mutex_lock(&t->mu);
		t->stop = true;
		pthread_cond_signal(&t->cv);
		pthread_mutex_unlock(&t->mu);
		pthread_join(t->th, NULL);
	}
	for (i = 0; i < e->n; i++) {
		pthread_mutex_destroy(&e->t[i].mu);
		pthread_cond_destroy(&e->t[i].cv);
		pthread_cond_destroy(&e->t[i].idle);
	}
	pthread_mutex_destroy(&e->load_mu);
	free(e->t);
	free(e);
}

int psl__bps_engine_pick(struct psl__bps_engine *e, uint64_t load)
{
	int i, best = 0;
	pthread_mutex_lock(&e->load_mu);
	for (i = 1; i < e->n; i++)
		if (e->t[i].load < e->t[best].load)
			best = i;
	e->t[best].load += load;
	pthread_mutex_unlock(&e->load_mu);
	return best;
}

void psl__bps_engine_push(struct psl__bps_engine *e, int tid, struct psl__bps_job *job)
{
	struct thread *t = &e->t[tid];
	pthread_mutex_lock(&t->mu);
	psl__bps_queue_push(&t->q, job);
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

void psl__bps_engine_drain(struct psl__bps_engine *e)
{
	int i;
	for (i = 0; i < e->n; i++) {
		struct thread *t = &e->t[i];
		pthread_mutex_lock(&t->mu);
		while (t->q.head || t->running)
			pthread_cond_wait(&t->idle, &t->mu);
		pthread_mutex_unlock(&t->mu);
	}
}
