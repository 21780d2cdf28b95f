/* The engine of pslite-server: threads that sum, each with its own queue. */
#ifndef PSL_SERVER_BPS_ENGINE_H
#define PSL_SERVER_BPS_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct psl_kv_request;

/* One unit of work, also used as a list node for requests a key holds. */
struct psl__bps_job {
	struct psl__bps_job *next;
	int type;
	int rank;		     /* the sender's worker rank */
	void *key;		     /* the server's key object */
	struct psl_kv_request *req;
	struct psl_kv_request *first; /* a round's first push, summed with req */
	struct psl__bps_job *list;   /* requests that go with it (init) */
	uint64_t *cnt;		     /* the key's count of queued jobs, for scheduling */
	bool reset_cnt;		     /* the last push of its key's round: *cnt = 0 */
	uint64_t seq;		     /* arrival order in its queue */
};

/*
 * A queue of jobs. Without scheduling it is FIFO. With scheduling it is
 * BytePS's engine order (byteps/server/queue.h): the job whose key has the
 * fewest jobs queued since the key's round was last fully received goes
 * first, and among equals the oldest. A key's count drops to 0 when all the
 * pushes of its round have arrived, so a round that can be finished is
 * finished before rounds that still wait for pushes. Jobs of one key keep
 * their order in both modes (they share one count).
 */
struct psl__bps_queue {
	struct psl__bps_job *head, **tail;
	size_t len;
	uint64_t seq;
	bool schedule;
};

void psl__bps_queue_init(struct psl__bps_queue *q, bool schedule);
/* Appends job; (*job->cnt)++ when job->cnt is set, or *job->cnt = 0 when
 * job->reset_cnt is (BytePS clears the count as it queues a round's last). */
void psl__bps_queue_push(struct psl__bps_queue *q, struct psl__bps_job *job);
/* Removes and returns the next job, NULL if empty. */
struct psl__bps_job *psl__bps_queue_pop(struct psl__bps_queue *q);

typedef void (*psl__bps_run_fn)(struct psl__bps_job *job, void *arg);

struct psl__bps_engine;

/* nthreads threads, each running run(job, arg) for the jobs of its queue. */
int psl__bps_engine_new(int nthreads, bool schedule, psl__bps_run_fn run, void *arg,
			struct psl__bps_engine **out);
/* Stops the threads after their queues are empty, frees e. */
void psl__bps_engine_free(struct psl__bps_engine *e);
/* The thread with the least load so far, which then gets `load` more
 * (BytePS spreads keys by their bytes this way). */
int psl__bps_engine_pick(struct psl__bps_engine *e, uint64_t load);
void psl__bps_engine_push(struct psl__bps_engine *e, int tid, struct psl__bps_job *job);
/* Waits until every queue is empty and no job runs. */
void psl__bps_engine_drain(struct psl__bps_engine *e);

#endif
