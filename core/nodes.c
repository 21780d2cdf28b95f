/* The node table's storage: one office per node this process runs, and
 * the calling thread's current one. Nothing here calls anything: every
 * file of the core may use it (log.c reads the current node's name). */
#include "config.h"

#include "postoffice.h"

#define OFFICE_INIT                                                                        \
	{                                                                                  \
		.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,            \
		.timer_cv = PTHREAD_COND_INITIALIZER, .my_id = -1, .my_rank = -1,          \
	}
struct psl__office psl__offices[PSL__OFFICES] = {[0 ... PSL__OFFICES - 1] = OFFICE_INIT};
__thread struct psl__office *psl__cur = &psl__offices[0];

/* DMLC_ROLE=joint: psl__offices[0] is the server, [1] the worker (a
 * group's: lifecycle.c); nodes: how many run */
static atomic_bool joint;
static atomic_int nodes = 1;

bool psl__joint(void)
{
	return atomic_load(&joint);
}

void psl__set_nodes(int n, bool on)
{
	atomic_store(&nodes, n < 1 ? 1 : n);
	atomic_store(&joint, on);
}

int psl__nodes_here(void)
{
	return atomic_load(&nodes);
}
