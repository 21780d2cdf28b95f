/* Recovery, as ps-lite has it: a server or worker started again after the
 * scheduler declared its predecessor lost takes that node's place (id, rank,
 * key range). The scheduler (with PS_RECOVERY=1) gives the newcomer the
 * whole node list, its own entry marked is_recovery, and tells every other
 * live node about the newcomer alone in an ADD_NODE; they connect to its new
 * address under the old id. A request to a lost node may wait for its
 * replacement (PS_RECOVERY_WAIT). docs/recovery.md says what survives. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "control.h"
#include "control_int.h"
#include "customer.h"
#include "log.h"
#include "postoffice.h"
#include "resender.h"
#include "van_host.h"

/* With o->mu held: the job is whole again once no node is lost, and a
 * program's psl_job_lost says so. */
static void whole_locked(struct psl__office *o)
{
	int id;
	if (o->role != PSL_SCHEDULER && o->peers[1].dead)
		return;
	for (id = 8; id <= o->max_id; id++)
		if (o->peers[id].known && o->peers[id].dead)
			return;
	o->job_lost_err = 0;
	o->job_lost_msg[0] = 0;
}

/* With o->mu held: node id is reachable again at n's address. */
static void revive_locked(struct psl__office *o, int id, const struct psl__node *n)
{
	struct psl__peer *p = &o->peers[id];
	p->node = *n;
	p->known = true;
	p->dead = false;
	p->up = false;
	p->down_at_ms = 0;
	p->down_pending_ms = 0;
	p->down_err = 0;
	p->undeliv_err = 0;
	p->wait_told = false;
	p->last_heartbeat_ms = psl__now_ms();
	whole_locked(o);
	pthread_cond_broadcast(&o->cv);
}

/* Node id is a new process: what the old one sent counts no more. */
static void revive(struct psl__office *o, int id, const struct psl__node *n)
{
	pthread_mutex_lock(&o->mu);
	revive_locked(o, id, n);
	pthread_mutex_unlock(&o->mu);
	if (o->cfg.resend)
		psl__resender_forget_seen(o, id);
}

/* Scheduler, with o->mu held: the entry of o->reg whose lost node n may
 * replace (the same role; the same DMLC_RANK if n gives one), or -1. */
static int lost_slot_locked(struct psl__office *o, const struct psl__node *n)
{
	int i;
	for (i = 0; i < o->nreg; i++) {
		int id = o->reg[i].id;
		if (o->reg[i].role != n->role || !o->peers[id].dead)
			continue;
		if (n->aux_id < 0 || psl_id_to_rank(id) == n->aux_id)
			return i;
	}
	return -1;
}

/* Scheduler: an ADD_NODE with list (n entries) to node `to`, with the proof
 * of PS_JOB_SECRET bound to that node's registration. */
static void send_list(struct psl__office *o, struct psl__node *list, int n, int to)
{
	char body[PSL__AUTH_BODY_MAX];
	struct psl__meta m;

	psl__meta_init(&m);
	m.cmd = PSL_CMD_ADD_NODE;
	m.nodes = list;
	m.node_size = n;
	m.recver = to;
	if (psl__auth_on(o)) {
		const char *nonce = psl__registration_nonce(&o->peers[to].node);
		if (!nonce || psl__auth_list_body(o, list, n, nonce, body)) {
			PSL_WARN("no proof of PS_JOB_SECRET for node %d's news of a recovered node",
				 to);
			return;
		}
		m.body = body;
		m.body_size = (int)strlen(body);
	}
	psl__send_control(o, &m, true); /* (a failure: psl__control_sent) */
}

/* Scheduler: tells every live server and worker but the newcomer (list[k])
 * the newcomer alone. */
static void tell_others(struct psl__office *o, struct psl__node *list, int total, int k)
{
	int i;
	for (i = 0; i < total; i++)
		if (i != k && !psl__node_dead(o, list[i].id))
			send_list(o, &list[k], 1, list[i].id);
}

/*
 * Scheduler: the others' news of a C++ ps-lite server that takes a lost
 * one's place waits until it has its node list. The workers send to it as
 * soon as they hear of it, on other connections than the list's; a C++ node
 * that gets a request before its list has no id yet and aborts (CHECK recver
 * != kEmpty), where a pslite node keeps the request. The newcomer's first
 * heartbeat says it has the list (C++ ps-lite starts its heartbeats once it
 * has it, one PS_HEARTBEAT_INTERVAL later); without one, the news goes out
 * after that interval and a second. (A worker gets nothing it did not ask
 * for: its news goes out at once, lest a server answer its first requests at
 * the lost one's address.)
 */
#define DEFERRED_MAX 16
static struct {
	struct psl__node *list; /* owned */
	int total, k;
	int64_t since;
} deferred[DEFERRED_MAX];
static int ndeferred;
static pthread_mutex_t deferred_mu = PTHREAD_MUTEX_INITIALIZER;

static int64_t deferred_bound_ms(struct psl__office *o)
{
	return (o->cfg.heartbeat_interval > 0 ? o->cfg.heartbeat_interval : 0) * 1000LL + 1000;
}

/* Keeps the others' news of list[k] (takes list); false if full. */
static bool defer(struct psl__node *list, int total, int k)
{
	bool ok;
	pthread_mutex_lock(&deferred_mu);
	ok = ndeferred < DEFERRED_MAX;
	if (ok) {
		deferred[ndeferred].list = list;
		deferred[ndeferred].total = total;
		deferred[ndeferred].k = k;
		deferred[ndeferred++].since = psl__now_ms();
	}
	pthread_mutex_unlock(&deferred_mu);
	return ok;
}

/* Sends the deferred news of node id (any id: -1, none sent), or of those
 * older than the bound at now (id 0); drop: of node id, none sent. */
static void deferred_send(struct psl__office *o, int id, int64_t now, bool drop)
{
	for (;;) {
		struct psl__node *list = NULL;
		int i, total = 0, k = 0;
		pthread_mutex_lock(&deferred_mu);
		for (i = 0; i < ndeferred; i++) {
			int nid = deferred[i].list[deferred[i].k].id;
			if (id < 0 || nid == id ||
			    (id == 0 && now - deferred[i].since >= deferred_bound_ms(o)))
				break;
		}
		if (i < ndeferred) {
			list = deferred[i].list;
			total = deferred[i].total;
			k = deferred[i].k;
			deferred[i] = deferred[--ndeferred];
		}
		pthread_mutex_unlock(&deferred_mu);
		if (!list)
			return;
		if (id >= 0 && !drop && !psl__node_dead(o, list[k].id))
			tell_others(o, list, total, k);
		free(list);
	}
}

void psl__recovery_heard(struct psl__office *o, int id)
{
	deferred_send(o, id, 0, false);
}

/* Scheduler: n takes a lost node's place, if there is one (true). */
static bool take(struct psl__office *o, const struct psl__node *n)
{
	struct psl__node *list;
	int total, k, id;
	bool cxx_server = n->cxx && n->role == PSL_SERVER;
	char d[96];

	pthread_mutex_lock(&o->mu);
	total = o->nreg;
	k = o->state == PSL__READY ? lost_slot_locked(o, n) : -1;
	list = k < 0 ? NULL : calloc((size_t)total + 1, sizeof(*list));
	if (!list) {
		pthread_mutex_unlock(&o->mu);
		return false;
	}
	id = o->reg[k].id;
	o->reg[k] = *n;
	o->reg[k].id = id;
	o->reg[k].is_recovery = true;
	revive_locked(o, id, &o->reg[k]);
	memcpy(list, o->reg, sizeof(*list) * (size_t)total);
	list[total] = o->me;
	pthread_mutex_unlock(&o->mu);
	if (o->cfg.resend)
		psl__resender_forget_seen(o, id);
	deferred_send(o, id, 0, true); /* (news of a predecessor that never spoke) */
	if (psl__control_connect(o, &list[k], 1)) {
		psl__node_lost(o, id, -ECONNREFUSED, "the scheduler cannot connect to its replacement");
		free(list);
		return true;
	}
	PSL_INFO("the %s at %s:%d takes the place of lost %s%s", psl__role_name(n->role),
		 n->hostname, n->port, psl__node_desc(o, id, d, sizeof(d)),
		 cxx_server ? " (a C++ ps-lite server: the others hear of it at its first heartbeat)"
			    : "");
	/* a worker's news first: its first requests, sent once it has its
	 * list, find the servers knowing its new address (else they cannot
	 * answer them) */
	if (n->role == PSL_WORKER)
		tell_others(o, list, total, k);
	send_list(o, list, total + 1, id);
	if (cxx_server && defer(list, total, k))
		return true;
	if (n->role != PSL_WORKER)
		tell_others(o, list, total, k);
	free(list);
	return true;
}

/*
 * Scheduler: newcomers that registered before the scheduler knew their
 * predecessor lost (a process started again is often quicker than the
 * heartbeat timeout, or than the closed connection's news) wait, bounded,
 * for a node of their role to be declared lost; then they are refused.
 */
#define WAITING_MAX 16
static struct {
	struct psl__node n;
	int64_t since;
} waiting[WAITING_MAX];
static int nwaiting;
static pthread_mutex_t waiting_mu = PTHREAD_MUTEX_INITIALIZER;

/* With waiting_mu held: n's entry, or -1. */
static int waiting_find(const struct psl__node *n)
{
	int i;
	for (i = 0; i < nwaiting; i++)
		if (waiting[i].n.port == n->port && !strcmp(waiting[i].n.hostname, n->hostname))
			return i;
	return -1;
}

static void waiting_drop(const struct psl__node *n)
{
	int i;
	pthread_mutex_lock(&waiting_mu);
	if ((i = waiting_find(n)) >= 0)
		waiting[i] = waiting[--nwaiting];
	pthread_mutex_unlock(&waiting_mu);
}

/* Keeps n waiting; false when too many wait already. */
static bool hold(struct psl__office *o, const struct psl__node *n)
{
	int i;
	pthread_mutex_lock(&waiting_mu);
	i = waiting_find(n);
	if (i < 0 && nwaiting < WAITING_MAX) {
		i = nwaiting++;
		waiting[i].since = psl__now_ms();
	}
	if (i >= 0)
		waiting[i].n = *n;
	pthread_mutex_unlock(&waiting_mu);
	if (i >= 0)
		PSL_INFO("the %s at %s:%d waits up to %d s for a lost %s whose place it can take "
			 "(PS_RECOVERY)",
			 psl__role_name(n->role), n->hostname, n->port, psl__recovery_bound_s(o),
			 psl__role_name(n->role));
	return i >= 0;
}

void psl__recovery_reset(struct psl__office *o)
{
	pthread_mutex_lock(&waiting_mu);
	nwaiting = 0;
	pthread_mutex_unlock(&waiting_mu);
	deferred_send(o, -1, 0, true);
}

bool psl__recovery_take(struct psl__office *o, const struct psl__node *n)
{
	if (!o->cfg.recovery)
		return false;
	return take(o, n) || hold(o, n);
}

void psl__recovery_retry(struct psl__office *o)
{
	struct psl__node n;
	int i = 0;

	for (;;) {
		pthread_mutex_lock(&waiting_mu);
		if (i >= nwaiting) {
			pthread_mutex_unlock(&waiting_mu);
			return;
		}
		n = waiting[i].n;
		pthread_mutex_unlock(&waiting_mu);
		if (take(o, &n))
			waiting_drop(&n);
		else
			i++;
	}
}

void psl__recovery_tick(struct psl__office *o, int64_t now)
{
	struct psl__node n;
	int i;

	/* a barrier that waited in vain for a lost node's replacement */
	psl__control_forget_node(o, 0);
	deferred_send(o, 0, now, false);

	for (;;) {
		pthread_mutex_lock(&waiting_mu);
		for (i = 0; i < nwaiting; i++)
			if (now - waiting[i].since > psl__recovery_bound_s(o) * 1000LL)
				break;
		if (i >= nwaiting) {
			pthread_mutex_unlock(&waiting_mu);
			return;
		}
		n = waiting[i].n;
		waiting[i] = waiting[--nwaiting];
		pthread_mutex_unlock(&waiting_mu);
		PSL_WARN("refused the %s at %s:%d: no %s of this job was lost within %d s of its "
			 "registration, so it has no place to take (PS_RECOVERY)",
			 psl__role_name(n.role), n.hostname, n.port, psl__role_name(n.role),
			 psl__recovery_bound_s(o));
		psl__tell_refused(o, &n, "no %s of this job was lost within %d s: there is no place "
				      "to take (PS_RECOVERY=1; check DMLC_NUM_SERVER, "
				      "DMLC_NUM_WORKER and DMLC_RANK)",
				  psl__role_name(n.role), psl__recovery_bound_s(o));
	}
}

/* Node: whether an entry of the scheduler's news says what this node knows
 * already (a node list sent again: the scheduler, this node, a live peer at
 * the same address). */
static bool news_known(struct psl__office *o, const struct psl__node *n)
{
	bool same;
	if (n->id < 1 || n->id > o->max_id)
		return false;
	pthread_mutex_lock(&o->mu);
	same = o->peers[n->id].known && !o->peers[n->id].dead &&
	       o->peers[n->id].node.port == n->port &&
	       !strcmp(o->peers[n->id].node.hostname, n->hostname);
	pthread_mutex_unlock(&o->mu);
	return same || (n->id == o->my_id && n->port == o->me.port &&
			!strcmp(n->hostname, o->me.hostname));
}

/* Node: one entry of the scheduler's news; false if it cannot be a server
 * or worker of this job. */
static bool news_entry_ok(struct psl__office *o, const struct psl__node *n)
{
	if (n->id < 8 || n->id > o->max_id || n->id == o->my_id || !n->hostname[0] ||
	    n->port <= 0)
		return false;
	return n->role == PSL_SERVER ? psl__is_server_id(n->id)
	       : n->role == PSL_WORKER ? psl__is_worker_id(n->id)
				       : false;
}

void psl__recovery_news(struct psl__office *o, const struct psl__meta *m)
{
	int i;
	char d[96];

	if (psl__auth_on(o) && (!o->nonce[0] || psl__auth_list_check(o, m, o->nonce))) {
		PSL_WARN("ignored news of a recovered node without a valid proof of PS_JOB_SECRET");
		return;
	}
	for (i = 0; i < m->node_size; i++) {
		const struct psl__node *n = &m->nodes[i];
		if (news_known(o, n))
			continue;
		if (!news_entry_ok(o, n)) {
			PSL_WARN("ignored an entry of the scheduler's news of a recovered node (id %d, "
				 "role %d, %s:%d): not another server or worker of this job",
				 n->id, n->role, n->hostname, n->port);
			continue;
		}
		/* what waits on its predecessor will never be answered */
		if (!psl__node_dead(o, n->id))
			psl__node_lost(o, n->id, -EHOSTDOWN, "a new node took its place");
		if (n->role != o->role && psl__control_connect(o, n, o->my_id))
			continue; /* (logged; it stays lost) */
		revive(o, n->id, n);
		PSL_INFO("%s is back (a new node took the lost one's place)",
			 psl__node_desc(o, n->id, d, sizeof(d)));
		psl__recovery_resend(o, n->id);
	}
}

int psl__recovery_wait(struct psl__office *o, int id)
{
	int64_t end, now;
	bool tell = false;
	int rc;
	char d[96];

	pthread_mutex_lock(&o->mu);
	end = o->peers[id].down_at_ms + o->cfg.recovery_wait_s * 1000LL;
	while (o->peers[id].dead && !o->peers[1].dead && o->state == PSL__READY &&
	       (now = psl__now_ms()) < end)
		psl__cond_wait_ms(&o->cv, &o->mu, end - now < 200 ? end - now : 200);
	rc = !o->peers[id].dead ? 0 : o->peers[1].dead ? -ENOLINK : -EHOSTDOWN;
	if (rc == -EHOSTDOWN && !o->peers[id].wait_told)
		tell = o->peers[id].wait_told = true;
	pthread_mutex_unlock(&o->mu);
	if (tell)
		PSL_ERR("no node took the place of lost %s within PS_RECOVERY_WAIT=%d s: its "
			"requests fail with \"%s\" (restart it with the same role%s)",
			psl__node_desc(o, id, d, sizeof(d)), o->cfg.recovery_wait_s,
			psl_strerror(rc), o->cfg.preferred_rank >= 0 ? " and DMLC_RANK" : "");
	return rc;
}

bool psl_is_recovery(void)
{
	int i;
	for (i = 0; i < PSL__OFFICES; i++)
		if (psl__offices[i].state == PSL__READY && psl__offices[i].recovered)
			return true;
	return false;
}
