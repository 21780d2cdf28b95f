/* The node table's queries: identity, groups, key ranges, which node a
 * thread works for, and the public queries about them. Below every other
 * part of the core but the table's storage (nodes.c) and the log. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "env.h"
#include "log.h"
#include "postoffice.h"

/* the node psl_use_role or psl_use_instance chose for the calling thread */
static __thread struct psl__office *selected;

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

struct psl__office *psl__enter_selected(void)
{
	struct psl__office *o = sel();
	psl__enter(o);
	return o;
}

struct psl__office *psl__enter_role(int role)
{
	struct psl__office *o = NULL;
	if (psl__nodes_here() > 1)
		o = running(selected) && selected->role == role ? selected : psl__office_of(role);
	if (!o)
		return psl__enter_selected();
	psl__enter(o);
	return o;
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

int psl__group_members(struct psl__office *o, int g, int *ids)
{
	int n = 0, i;
	if (g & PSL_GROUP_WORKERS)
		for (i = 0; i < o->cfg.num_workers; i++)
			ids[n++] = psl_worker_rank_to_id(i);
	if (g & PSL_GROUP_SERVERS)
		for (i = 0; i < o->cfg.num_servers; i++)
			ids[n++] = psl_server_rank_to_id(i);
	if (g & PSL_GROUP_SCHEDULER)
		ids[n++] = 1;
	return n;
}

bool psl__group_has(struct psl__office *o, int g, int id)
{
	if (id == 1)
		return g & PSL_GROUP_SCHEDULER;
	if (psl__is_server_id(id))
		return (g & PSL_GROUP_SERVERS) && psl_id_to_rank(id) < o->cfg.num_servers;
	if (psl__is_worker_id(id))
		return (g & PSL_GROUP_WORKERS) && psl_id_to_rank(id) < o->cfg.num_workers;
	return false;
}

int psl_server_key_range(int rank, uint64_t *begin, uint64_t *end)
{
	struct psl__office *o = psl__cur;
	uint64_t q;
	psl__clear_error();
	if (o->cfg.server_groups <= 0)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN, "psl_server_key_range: pslite is not "
				"started on this node: call psl_start first");
	if (!begin || !end)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_server_key_range: %s is NULL",
				!begin ? "begin" : "end");
	if (rank < 0 || rank >= o->cfg.server_groups)
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_server_key_range: rank %d: this job "
				"has servers 0 to %d", rank, o->cfg.server_groups - 1);
	q = UINT64_MAX / (uint64_t)o->cfg.server_groups;
	*begin = q * (uint64_t)rank;
	*end = q * (uint64_t)(rank + 1);
	return 0;
}

const char *psl__node_desc(struct psl__office *o, int id, char *buf, size_t len)
{
	if (id == PSL_EMPTY) {
		snprintf(buf, len, "an unregistered peer");
	} else if (id == 1) {
		snprintf(buf, len, "the scheduler (%s:%d)", o->cfg.root_uri, o->cfg.root_port);
	} else if (id >= 8 && id <= o->max_id && o->peers && o->peers[id].known &&
		   o->cfg.group_size > 1) { /* group rank.instance */
		snprintf(buf, len, "%s %d.%d (id %d, %s:%d)",
			 psl__is_server_id(id) ? "server" : "worker",
			 psl_id_to_rank(id) / o->cfg.group_size, psl_id_to_rank(id) % o->cfg.group_size,
			 id, o->peers[id].node.hostname, o->peers[id].node.port);
	} else if (id >= 8 && id <= o->max_id && o->peers && o->peers[id].known) {
		snprintf(buf, len, "%s %d (id %d, %s:%d)", psl__is_server_id(id) ? "server" : "worker",
			 psl_id_to_rank(id), id, o->peers[id].node.hostname, o->peers[id].node.port);
	} else {
		snprintf(buf, len, "node %d", id);
	}
	return buf;
}


void (*_Atomic psl__loss_hook)(struct psl__office *o, int id, int err, const char *why);

void psl__node_lost(struct psl__office *o, int id, int err, const char *why)
{
	void (*lost)(struct psl__office *, int, int, const char *) = atomic_load(&psl__loss_hook);
	if (lost)
		lost(o, id, err, why);
}

bool psl__node_dead(struct psl__office *o, int id)
{
	bool d;
	if (id < 1 || id > o->max_id || !o->peers)
		return true;
	pthread_mutex_lock(&o->mu);
	d = o->peers[id].dead;
	pthread_mutex_unlock(&o->mu);
	return d;
}


int psl__recovery_bound_s(struct psl__office *o)
{
	bool hb = o->cfg.heartbeat_interval > 0 && o->cfg.heartbeat_timeout > 0;
	return (hb ? 2 * o->cfg.heartbeat_timeout : 0) + 10;
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
int psl_my_address(char *host, size_t len, int *port)
{
	struct psl__office *o = sel();
	size_t n;
	psl__clear_error();
	if (o->state != PSL__READY)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN,
				"psl_my_address: the node has not started: call it after psl_start");
	n = strlen(o->me.hostname);
	if (!host || n >= len)
		return PSL_FAIL(-ENOSPC, PSL_LOG_WARN,
				"psl_my_address: host needs %zu bytes, %zu given", n + 1, len);
	memcpy(host, o->me.hostname, n + 1);
	if (port)
		*port = o->me.port;
	return 0;
}
int psl_num_workers(void)
{
	struct psl__office *o = psl__cur;
	return o->cfg.worker_groups;
}
int psl_num_servers(void)
{
	struct psl__office *o = psl__cur;
	return o->cfg.server_groups;
}
int psl_group_size(void)
{
	struct psl__office *o = psl__cur;
	return o->cfg.group_size > 0 ? o->cfg.group_size : 1;
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

int psl__server_id(struct psl__office *o, int r)
{
	return psl_server_rank_to_id(r * psl_group_size() + o->cfg.instance);
}

int psl__id_to_group_rank(struct psl__office *o, int id)
{
	return psl_id_to_rank(id) / psl_group_size();
}
const char *psl_van_name(void)
{
	struct psl__office *o = sel();
	return o->lib.ops ? o->lib.ops->name : NULL;
}
