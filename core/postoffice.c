/* The node table: identity, groups, key ranges, loss and the queries. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "control.h"
#include "control_int.h"
#include "customer.h"
#include "log.h"
#include "ipc.h"
#include "postoffice.h"
#include "resender.h"

#define OFFICE_INIT                                                                        \
	{                                                                                  \
		.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,            \
		.timer_cv = PTHREAD_COND_INITIALIZER, .my_id = -1, .my_rank = -1,          \
	}
struct psl__office psl__offices[PSL__OFFICES] = {[0 ... PSL__OFFICES - 1] = OFFICE_INIT};
__thread struct psl__office *psl__cur = &psl__offices[0];
#define po psl__po

/* DMLC_ROLE=joint: psl__offices[0] is the server, [1] the worker (a
 * group's: lifecycle.c); nodes: how many run */
static atomic_bool joint;
static atomic_int nodes = 1;

/* the node psl_use_role or psl_use_instance chose for the calling thread */
static __thread struct psl__office *selected;

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

static bool running(const struct psl__office *o)
{
	return o && o >= psl__offices && o < psl__offices + psl__nodes_here() &&
	       o->state != PSL__STOPPED;
}

/* The node the public queries describe: the calling thread's choice
 * (psl_use_role, psl_use_instance), else psl__offices[0] (not psl__cur:
 * they may be called from a handler of any node). */
static struct psl__office *sel(void)
{
	return psl__nodes_here() > 1 && running(selected) ? selected : &psl__offices[0];
}

void psl__enter_selected(void)
{
	psl__enter(sel());
}

void psl__enter_role(int role)
{
	struct psl__office *o = NULL;
	if (psl__nodes_here() > 1)
		o = running(selected) && selected->role == role ? selected : psl__office_of(role);
	if (o)
		psl__enter(o);
	else
		psl__enter_selected();
}

struct psl__office *psl__office_of(int role)
{
	int i;
	for (i = 0; i < psl__nodes_here(); i++)
		if (psl__offices[i].role == role && psl__offices[i].state != PSL__STOPPED)
			return &psl__offices[i];
	return NULL;
}

struct psl__office *psl__office_at(int role, int instance)
{
	int i;
	for (i = 0; i < psl__nodes_here(); i++)
		if (psl__offices[i].role == role && psl__offices[i].state != PSL__STOPPED &&
		    psl__offices[i].cfg.instance == instance)
			return &psl__offices[i];
	return NULL;
}

/* ------------------------------------------------------ ids and groups -- */

int psl_server_rank_to_id(int rank)
{
	return 8 + 2 * rank;
}

int psl_worker_rank_to_id(int rank)
{
	return 9 + 2 * rank;
}

int psl_id_to_rank(int id)
{
	int r = (id - 8) / 2;
	return r > 0 ? r : 0;
}

int psl__group_members(int g, int *ids)
{
	int n = 0, i;
	if (g & PSL_GROUP_WORKERS)
		for (i = 0; i < po.cfg.num_workers; i++)
			ids[n++] = psl_worker_rank_to_id(i);
	if (g & PSL_GROUP_SERVERS)
		for (i = 0; i < po.cfg.num_servers; i++)
			ids[n++] = psl_server_rank_to_id(i);
	if (g & PSL_GROUP_SCHEDULER)
		ids[n++] = 1;
	return n;
}

bool psl__group_has(int g, int id)
{
	if (id == 1)
		return g & PSL_GROUP_SCHEDULER;
	if (psl__is_server_id(id))
		return (g & PSL_GROUP_SERVERS) && psl_id_to_rank(id) < po.cfg.num_servers;
	if (psl__is_worker_id(id))
		return (g & PSL_GROUP_WORKERS) && psl_id_to_rank(id) < po.cfg.num_workers;
	return false;
}

int psl_server_key_range(int rank, uint64_t *begin, uint64_t *end)
{
	uint64_t q;
	psl__clear_error();
	if (po.cfg.server_groups <= 0)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN, "psl_server_key_range: pslite is not "
				"started on this node: call psl_start first");
	if (!begin || !end)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_server_key_range: %s is NULL",
				!begin ? "begin" : "end");
	if (rank < 0 || rank >= po.cfg.server_groups)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_server_key_range: rank %d: this job "
				"has servers 0 to %d", rank, po.cfg.server_groups - 1);
	q = UINT64_MAX / (uint64_t)po.cfg.server_groups;
	*begin = q * (uint64_t)rank;
	*end = q * (uint64_t)(rank + 1);
	return 0;
}

const char *psl__node_desc(int id, char *buf, size_t len)
{
	if (id == PSL_EMPTY) {
		snprintf(buf, len, "an unregistered peer");
	} else if (id == 1) {
		snprintf(buf, len, "the scheduler (%s:%d)", po.cfg.root_uri, po.cfg.root_port);
	} else if (id >= 8 && id <= po.max_id && po.peers && po.peers[id].known &&
		   po.cfg.group_size > 1) { /* group rank.instance */
		snprintf(buf, len, "%s %d.%d (id %d, %s:%d)",
			 psl__is_server_id(id) ? "server" : "worker",
			 psl_id_to_rank(id) / po.cfg.group_size, psl_id_to_rank(id) % po.cfg.group_size,
			 id, po.peers[id].node.hostname, po.peers[id].node.port);
	} else if (id >= 8 && id <= po.max_id && po.peers && po.peers[id].known) {
		snprintf(buf, len, "%s %d (id %d, %s:%d)", psl__is_server_id(id) ? "server" : "worker",
			 psl_id_to_rank(id), id, po.peers[id].node.hostname, po.peers[id].node.port);
	} else {
		snprintf(buf, len, "node %d", id);
	}
	return buf;
}

int psl__send_check(int id)
{
	int rc = 0;
	if (id < 1 || id > po.max_id || !po.peers)
		return -EHOSTDOWN;
	pthread_mutex_lock(&po.mu);
	if (po.role != PSL_SCHEDULER && po.peers[1].dead)
		rc = -ENOLINK;
	else if (po.peers[id].dead)
		rc = -EHOSTDOWN;
	pthread_mutex_unlock(&po.mu);
	if (rc == -EHOSTDOWN && po.cfg.recovery_wait_s > 0 && po.role != PSL_SCHEDULER)
		rc = psl__recovery_wait(id);
	return rc;
}

bool psl__node_dead(int id)
{
	bool d;
	if (id < 1 || id > po.max_id || !po.peers)
		return true;
	pthread_mutex_lock(&po.mu);
	d = po.peers[id].dead;
	pthread_mutex_unlock(&po.mu);
	return d;
}

void psl__node_lost(int id, int err, const char *why)
{
	char d[96];
	bool leaving, cut, hold;
	if (id < 1 || id > po.max_id)
		return;
	psl__ipc_peer_lost(id);
	leaving = psl__control_node_leaving(id);
	hold = !leaving && psl__recovery_holds(id);
	pthread_mutex_lock(&po.mu);
	if (po.peers[id].dead || (po.state != PSL__READY && po.state != PSL__STARTING)) {
		pthread_mutex_unlock(&po.mu);
		return;
	}
	/* without the scheduler a running node cannot go on (no barriers, no
	 * finalize, no news of lost nodes): what waits on anyone fails */
	cut = id == 1 && po.role != PSL_SCHEDULER && po.state == PSL__READY && !leaving;
	po.peers[id].dead = true;
	po.peers[id].down_at_ms = psl__now_ms();
	if (!leaving && !po.job_lost_err) {
		po.job_lost_err = cut || id == 1 ? -ENOLINK : err ? err : -EHOSTDOWN;
		snprintf(po.job_lost_msg, sizeof(po.job_lost_msg), "lost %s: %s",
			 psl__node_desc(id, d, sizeof(d)), why);
	}
	pthread_cond_broadcast(&po.cv);
	pthread_mutex_unlock(&po.mu);
	if (leaving)
		PSL_DBG("%s left: %s", psl__node_desc(id, d, sizeof(d)), why);
	else if (cut)
		PSL_ERR("lost %s: %s; every request fails now with \"%s\"",
			psl__node_desc(id, d, sizeof(d)), why, psl_strerror(-ENOLINK));
	else if (hold)
		PSL_ERR("lost %s: %s; the requests in flight to it wait for its replacement",
			psl__node_desc(id, d, sizeof(d)), why);
	else
		PSL_ERR("lost %s: %s; requests waiting on it fail with \"%s\"",
			psl__node_desc(id, d, sizeof(d)), why, psl_strerror(err));
	/* the van lets go of it: what is in flight from it is dropped (a frozen
	 * server's rendezvous into a worker's buffers, over ucx, held the
	 * worker's requests until the server woke up) */
	if (!leaving && id != po.my_id && po.van && po.lib.ops && po.lib.ops->disconnect)
		po.lib.ops->disconnect(po.van, id);
	if (hold) {
		psl__recovery_hold(id, err ? err : -EHOSTDOWN);
	} else {
		psl__resender_forget(id);
		psl__customers_node_lost(id, err);
	}
	if (cut)
		psl__customers_node_lost(0, -ENOLINK);
	/* the others hear of the loss before a barrier it releases (the final
	 * one, say) lets them go: they must not take it for a node that left */
	if (po.role == PSL_SCHEDULER && !leaving)
		psl__control_announce_lost(id, why);
	psl__control_forget_node(id);
	if (po.role == PSL_SCHEDULER && !leaving && po.cfg.recovery)
		psl__recovery_retry();
}

/* ------------------------------------------------------------- queries -- */

int psl_job_lost(char *why, size_t len)
{
	int rc = 0, i;
	if (why && len)
		why[0] = 0;
	/* a joint process: the first of its nodes' losses */
	for (i = 0; i < psl__nodes_here() && !rc; i++) {
		struct psl__office *o = &psl__offices[i];
		pthread_mutex_lock(&o->mu);
		rc = o->job_lost_err;
		if (rc && why && len)
			snprintf(why, len, "%s", o->job_lost_msg);
		pthread_mutex_unlock(&o->mu);
	}
	return rc;
}

enum psl_role psl_my_role(void)
{
	return psl__joint() ? PSL_JOINT : (enum psl_role)psl__offices[0].role;
}
bool psl_is_scheduler(void)
{
	return psl__office_of(PSL_SCHEDULER) != NULL;
}
bool psl_is_server(void)
{
	return psl__office_of(PSL_SERVER) != NULL;
}
bool psl_is_worker(void)
{
	return psl__office_of(PSL_WORKER) != NULL;
}
/* The instances of role this process runs, for messages: "0 to 1" */
static const char *instances_of(int role, char *buf, size_t len)
{
	int i, lo = -1, hi = -1;
	for (i = 0; i < psl__nodes_here(); i++) {
		const struct psl__office *o = &psl__offices[i];
		if (o->role != role || o->state == PSL__STOPPED)
			continue;
		if (lo < 0 || o->cfg.instance < lo)
			lo = o->cfg.instance;
		if (o->cfg.instance > hi)
			hi = o->cfg.instance;
	}
	if (lo == hi)
		snprintf(buf, len, "%d", lo);
	else
		snprintf(buf, len, "%d to %d", lo, hi);
	return buf;
}

/* Makes o the calling thread's node (psl_use_role, psl_use_instance); what
 * names the call and its arguments for messages. */
static int choose(struct psl__office *o, int role, int instance, const char *what)
{
	char have[32];
	psl__clear_error();
	if (o) {
		selected = o;
		psl__enter(o);
		return 0;
	}
	if (psl__offices[0].state == PSL__STOPPED)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN, "%s: pslite is not started in this "
				"process", what);
	if (instance < 0 || !psl__office_of(role))
		return PSL_FAIL(-ENOENT, PSL_LOG_WARN, "%s: this process runs no %s node", what,
				psl__role_name(role));
	instances_of(role, have, sizeof(have));
	return PSL_FAIL(-ENOENT, PSL_LOG_WARN, "%s: this process runs %s instance%s %s only, "
			"not %d", what, psl__role_name(role), strchr(have, ' ') ? "s" : "",
			have, instance);
}

int psl_use_role(enum psl_role role)
{
	return choose(psl__office_of(role), role, -1, "psl_use_role");
}

int psl_use_instance(enum psl_role role, int instance)
{
	if (instance < 0) {
		psl__clear_error();
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_use_instance: instance %d: expected "
				"0 to DMLC_GROUP_SIZE - 1", instance);
	}
	return choose(psl__office_at(role, instance), role, instance, "psl_use_instance");
}
int psl_my_rank(void)
{
	struct psl__office *o = sel();
	return o->state == PSL__READY ? o->my_rank / psl_group_size() : -1;
}
int psl_my_id(void)
{
	struct psl__office *o = sel();
	return o->state == PSL__READY ? o->my_id : -1;
}
int psl_num_workers(void)
{
	return po.cfg.worker_groups;
}
int psl_num_servers(void)
{
	return po.cfg.server_groups;
}
int psl_group_size(void)
{
	return po.cfg.group_size > 0 ? po.cfg.group_size : 1;
}
int psl_my_instance(void)
{
	struct psl__office *o = sel();
	return o->state == PSL__READY ? o->cfg.instance : -1;
}
int psl_my_instance_rank(void)
{
	struct psl__office *o = sel();
	return o->state == PSL__READY ? o->my_rank : -1;
}

int psl__server_id(int r)
{
	return psl_server_rank_to_id(r * psl_group_size() + po.cfg.instance);
}

int psl__id_to_group_rank(int id)
{
	return psl_id_to_rank(id) / psl_group_size();
}
const char *psl_van_name(void)
{
	struct psl__office *o = sel();
	return o->lib.ops ? o->lib.ops->name : NULL;
}

int psl__barrier_here(int customer_id, int group, int cmd)
{
	struct psl__office *home = psl__cur;
	unsigned gen[PSL__OFFICES];
	int rc = 0, i, n = psl__nodes_here();
	bool in[PSL__OFFICES] = {false};

	for (i = 0; i < n && !rc; i++) {
		psl__enter(&psl__offices[i]);
		if (!psl__group_has(group, po.my_id) && n > 1)
			continue;
		rc = psl__control_barrier_arrive(customer_id, group, cmd, &gen[i]);
		in[i] = rc == 0;
		if (rc == 1)
			rc = 0;
	}
	/* (a node that could not arrive: the other's barrier cannot end) */
	for (i = 0; i < n && !rc; i++) {
		if (!in[i])
			continue;
		psl__enter(&psl__offices[i]);
		rc = psl__control_barrier_wait(group, gen[i]);
	}
	psl__enter(home);
	return rc;
}

/* Whether this process runs its whole instance group of one role
 * (psl_start_group with DMLC_GROUP_SIZE > 1, not joint). */
static bool whole_group_here(void)
{
	return psl_group_size() > 1 && !psl__joint() && psl__nodes_here() == psl_group_size();
}

/* C++ ps-lite's Postoffice::Barrier in a process of a whole group: one
 * BARRIER from the first instance stands for all of them (and for all the
 * process's threads that ask at the same time). */
static int barrier_first(int customer_id, int group)
{
	struct psl__office *home = psl__cur;
	unsigned gen;
	int rc;
	psl__enter(&psl__offices[0]);
	rc = psl__control_barrier_shared(customer_id, group, &gen);
	if (rc == 0)
		rc = psl__control_barrier_wait(group, gen);
	psl__enter(home);
	return rc == 1 ? 0 : rc;
}

int psl_barrier(int customer_id, int group)
{
	psl__clear_error();
	if (psl__offices[0].state != PSL__READY)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN, "psl_barrier: pslite is not started on "
				"this node (or is finalizing): call it between psl_start and "
				"psl_finalize");
	if (group < 1 || group > 7)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_barrier: group %d is no node group: "
				"pass 1 to 7 (PSL_GROUP_SCHEDULER, _SERVERS, _WORKERS or their "
				"sum)", group);
	/* a process that holds its whole instance group asks once, from its
	 * first instance, as C++ ps-lite's processes do (a group-level
	 * BARRIER); a process of one instance of a group asks for itself
	 * (StepMesh's model: an INSTANCE_BARRIER); the scheduler counts both
	 * kinds in one barrier (barrier.c) */
	if (whole_group_here())
		return psl__ret("psl_barrier", barrier_first(customer_id, group));
	return psl__ret("psl_barrier",
			psl__barrier_here(customer_id, group,
				     psl_group_size() > 1 ? PSL_CMD_INSTANCE_BARRIER
							  : PSL_CMD_BARRIER));
}

