/* The node's shared state: configuration, identity, node table, van. */
#ifndef PSL_CORE_POSTOFFICE_H
#define PSL_CORE_POSTOFFICE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "env.h"
#include "clock.h"
#include "message.h"
#include "pslite.h"
#include "pslite/van.h"
#include "van_loader.h"

enum psl__state {
	PSL__STOPPED = 0,
	PSL__STARTING, /* bound, registering */
	PSL__READY,    /* node list known */
	PSL__FINALIZING,
};

/* One known node (indexed by id in an office's peers). */
struct psl__peer {
	struct psl__node node;
	bool known;	/* in the node list */
	bool up;	/* the van reported it reachable */
	bool dead;	/* lost: requests to it fail */
	int64_t last_heartbeat_ms;
	int64_t down_at_ms;
	int64_t down_pending_ms; /* lost while we wait for the final release: judged later */
	int down_err;
	/* scheduler: a control message to it could not be sent (err, its cmd);
	 * the timer tells it and declares it lost (control_fail.c) */
	int undeliv_err;
	int undeliv_cmd;
	/* a request waited PS_RECOVERY_WAIT for its replacement in vain, and
	 * that was said (recovery.c) */
	bool wait_told;
	/* PS_RESEND with PS_RECOVERY: its requests in flight wait for its
	 * replacement, and would fail with held_err (recovery_resend.c) */
	bool held;
	int held_err;
};

/* One node's state. A process is one node, two for DMLC_ROLE=joint (a
 * server and a worker, each with its own van, id and rank, as C++ ps-lite's
 * joint role), or a whole instance group (psl_start_group: G of its role, G
 * servers and G workers when joint). The core's functions are handed the
 * node they work for (struct psl__office *o, their first parameter); the
 * calling thread's current node (psl__cur) is only what the public calls that
 * name no node resolve, and what user code and the log see (psl__enter). */
struct psl__office {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct psl__config cfg;
	enum psl__state state;
	int role;
	int my_id;
	int my_rank;
	struct psl__node me;

	struct psl__van_lib lib;
	struct psl_van *van;
	struct psl_van_host host;
	struct psl_van_caps caps;

	struct psl__peer *peers; /* [0, max_id] */
	int max_id;
	atomic_int van_ts; /* ps-lite's per-Van control timestamp */

	/* node side of start-up */
	bool got_node_list;
	/* scheduler: the node list went out to every node (list_sent) and
	 * list_pending sends of it have not completed yet; the first
	 * list_connected entries of reg have a connection under their id */
	bool list_sent;
	int list_pending;
	int list_connected;
	/* node: a barrier request that could not be sent fails the barrier */
	int barrier_err;
	char barrier_msg[768];
	/* PS_RESEND: keep what we send for resending from now on (after the node
	 * list, as ps-lite does). Received messages are ACKed and de-duplicated
	 * from the start, so that no request (a start-up barrier) can arrive
	 * un-ACKed, be resent later and count twice (docs/wire.md section 9). */
	atomic_bool resend_live;
	int start_err; /* set when registration failed */
	char start_msg[768];
	/* a node's registration whose send failed: the start fails with it
	 * after a grace, unless the van says why first (another van, a secret) */
	int reg_send_err;
	int64_t reg_send_at_ms;
	char reg_send_msg[768];
	char refused[256]; /* scheduler: the last registration it refused, and why */

	/* barriers, node side */
	unsigned barrier_gen;
	bool leaving;	     /* this node is in its final barrier */
	bool final_released; /* the final barrier was released: peers may go now */

	/* scheduler: registration and barrier bookkeeping */
	struct psl__node *reg;
	int nreg;
	bool *barrier_senders[8]; /* [group]: BARRIER arrivals by id, then INSTANCE_BARRIER */
	int barrier_last_customer[8];

	/* timer thread */
	pthread_t timer;
	bool timer_running;
	bool timer_stop;

	int64_t sched_last_heartbeat_ms;
	/* deliveries to user code (handlers, callbacks) on receive threads
	 * now, when the latest began, and when the last long one (a second or
	 * more) ended: heartbeat answers may wait behind them (heartbeat.c) */
	atomic_int delivering;
	_Atomic int64_t delivery_began_ms;
	_Atomic int64_t long_delivery_end_ms;

	/* the job's first loss this node knew of (psl_job_lost) */
	int job_lost_err;
	char job_lost_msg[320];

	/* what this node's log lines say it is ("worker 0") */
	char log_who[48];
	/* the timer thread's wake-up (timer.c), under mu */
	pthread_cond_t timer_cv;
	/* this node took a lost node's place (psl_is_recovery, recovery.c) */
	bool recovered;
	/* this node's registration nonce (registration.c) */
	char nonce[33];
	/* PS_CALLER_PROGRESS (progress.c): threads driving the van now, and
	 * whether fini is near (no more drives) */
	atomic_int drivers;
	atomic_bool drive_off;
};

/* [0]: the process's node (a joint process's server); [1]: a joint
 * process's worker. A process that runs a group of G (psl_start_group):
 * [0, G) its instances of its role (a joint process's servers), [G, 2G) a
 * joint process's workers. */
#define PSL__OFFICES (2 * PSL_MAX_GROUP)
extern struct psl__office psl__offices[PSL__OFFICES];
/* The node the calling thread works for: what a public call that names no
 * node means (psl_my_rank, psl_num_workers, ...), whose name the log writes,
 * and what a node-less public call from user code (a handler) means. Set at
 * the ways in (psl__enter) and kept around user code (PSL__USER_CALL); the
 * core below them reads the office it is handed instead. */
extern __thread struct psl__office *psl__cur;
#define psl__po (*psl__cur) /* (the unit tests) */

/* The node the calling thread works for from now on. */
static inline void psl__enter(struct psl__office *o)
{
	if (o)
		psl__cur = o;
}
/* Runs user code (a handler, a callback) from the core: whatever node it
 * makes current (in a joint process, by a call on the other node's
 * objects), the caller's node is current again after it. */
#define PSL__USER_CALL(call)                                                               \
	do {                                                                               \
		struct psl__office *psl__o_ = psl__cur;                                    \
		call;                                                                      \
		psl__enter(psl__o_);                                                       \
	} while (0)
/* The calling thread's node for the public calls that name none
 * (psl_my_rank, psl_simple_app_new, ...): the one psl_use_role chose, else
 * psl__offices[0]; made current (for the log and user code) and returned,
 * for the call to pass down. */
struct psl__office *psl__enter_selected(void);
/* The node of role in a process of several (objects of that role belong to
 * it): the calling thread's choice if it has that role (psl_use_instance),
 * else the first of role; else as psl__enter_selected. */
struct psl__office *psl__enter_role(int role);
/* Whether this process runs DMLC_ROLE=joint, and how many of psl__offices
 * it runs (1 when stopped); set by start-up (lifecycle.c). */
bool psl__joint(void);
void psl__set_nodes(int n, bool joint);
int psl__nodes_here(void);
/* A barrier of every node of this process in group: each arrives, then
 * each waits (a joint process's two nodes are both awaited)
 * (barrier_call.c). */
int psl__barrier_here(int customer_id, int group, int cmd);
/* The node of this process that has role (PSL_SERVER, PSL_WORKER,
 * PSL_SCHEDULER), or NULL. */
struct psl__office *psl__office_of(int role);
/* Instance `instance` of role in this process, or NULL. */
struct psl__office *psl__office_at(int role, int instance);

static inline bool psl__is_server_id(int id)
{
	return id >= 8 && id % 2 == 0;
}
static inline bool psl__is_worker_id(int id)
{
	return id >= 9 && id % 2 == 1;
}

/* Ids of the members of group g (1..7) in ps-lite's order: workers, servers,
 * scheduler. Returns how many; ids must hold num_workers+num_servers+1. */
int psl__group_members(struct psl__office *o, int g, int *ids);
bool psl__group_has(struct psl__office *o, int g, int id);

/* The id of instance psl_my_instance() of server group r: where this
 * worker sends the keys of server r's range. */
int psl__server_id(struct psl__office *o, int r);
/* The group rank of an instance's id: its rank / DMLC_GROUP_SIZE. */
int psl__id_to_group_rank(struct psl__office *o, int id);

/* Marks a node lost and fails what waits on it. Takes o->mu itself. The
 * parts of the core that find a loss (heartbeats, failed sends, the van's
 * events) are below those that let go of what they keep for the node: this
 * reaches them through psl__loss_hook, loss.c's psl__loss_handle, which
 * psl__core_wire sets before a node starts (lifecycle.c). */
void psl__node_lost(struct psl__office *o, int id, int err, const char *why);
extern void (*_Atomic psl__loss_hook)(struct psl__office *o, int id, int err, const char *why);
void psl__loss_handle(struct psl__office *o, int id, int err, const char *why);
bool psl__node_dead(struct psl__office *o, int id);
/* Whether a request may be sent to node id: 0, -EHOSTDOWN (id was lost), or
 * -ENOLINK (this server or worker lost the scheduler: every request fails at
 * once, pending ones included; nothing waits for answers that may never
 * come) (loss.c). */
int psl__send_check(struct psl__office *o, int id);
/* How long a newcomer waits at the scheduler for a place (s): twice the
 * heartbeat timeout, and 10 (postoffice.c). */
int psl__recovery_bound_s(struct psl__office *o);
/* A request to lost node id waits for a node that takes its place, up to
 * PS_RECOVERY_WAIT seconds after the loss: 0 once one did, else the loss's
 * error (recovery.c). Takes o->mu itself. */
int psl__recovery_wait(struct psl__office *o, int id);
/* Scheduler, after a loss: a newcomer waiting for a place takes it. */
void psl__recovery_retry(struct psl__office *o);
/* "server 1 (id 10, 127.0.0.1:4567)" */
const char *psl__node_desc(struct psl__office *o, int id, char *buf, size_t len);

#endif
