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

#define po psl__po

/* With po.mu held: the job is whole again once no node is lost, and a
 * program's psl_job_lost says so. */
static void whole_locked(void)
{
	int id;
	if (po.role != PSL_SCHEDULER && po.peers[1].dead)
		return;
	for (id = 8; id <= po.max_id; id++)
		if (po.peers[id].known && po.peers[id].dead)
			return;
	po.job_lost_err = 0;
	po.job_lost_msg[0] = 0;
}

/* With po.mu held: node id is reachable again at n's address. */
static void revive_locked(int id, const struct psl__node *n)
{
	struct psl__peer *p = &po.peers[id];
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
	whole_locked();
	pthread_cond_broadcast(&po.cv);
}

/* Node id is a new process: what the old one sent counts no more. */
static void revive(int id, const struct psl__node *n)
{
	pthread_mutex_lock(&po.mu);
	revive_locked(id, n);
	pthread_mutex_unlock(&po.mu);
	if (po.cfg.resend)
		psl__resender_forget_seen(psl__cur, id);
}

/* Scheduler, with po.mu held: the entry of po.reg whose lost node n may
 * replace (the same role; the same DMLC_RANK if n gives one), or -1. */
static int lost_slot_locked(const struct psl__node *n)
{
	int i;
	for (i = 0; i < po.nreg; i++) {
		int id = po.reg[i].id;
		if (po.reg[i].role != n->role || !po.peers[id].dead)
			continue;
		if (n->aux_id < 0 || psl_id_to_rank(id) == n->aux_id)
			return i;
	}
	return -1;
}

/* Scheduler: an ADD_NODE with list (n entries) to node `to`, with the proof
 * of PS_JOB_SECRET bound to that node's registration. */
static void send_list(struct psl__node *list, int n, int to)
{
	char body[PSL__AUTH_BODY_MAX];
	struct psl__meta m;

	psl__meta_init(&m);
	m.cmd = PSL_CMD_ADD_NODE;
	m.nodes = list;
	m.node_size = n;
	m.recver = to;
	if (psl__auth_on(psl__cur)) {
		const char *nonce = psl__registration_nonce(&po.peers[to].node);
		if (!nonce || psl__auth_list_body(psl__cur, list, n, nonce, body)) {
			PSL_WARN("no proof of PS_JOB_SECRET for node %d's news of a recovered node",
				 to);
			return;
		}
		m.body = body;
		m.body_size = (int)strlen(body);
	}
	psl__send_control(psl__cur, &m, true); /* (a failure: psl__control_sent) */
}

/* Scheduler: tells every live server and worker but the newcomer (list[k])
 * the newcomer alone. */
static void tell_others(struct psl__node *list, int total, int k)
{
	int i;
	for (i = 0; i < total; i++)
		if (i != k && !psl__node_dead(psl__cur, list[i].id))
			send_list(&list[k], 1, list[i].id);
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

static int64_t deferred_bound_ms(void)
{
	return (po.cfg.heartbeat_interval > 0 ? po.cfg.heartbeat_interval : 0) * 1000LL + 1000;
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
static void deferred_send(int id, int64_t now, bool drop)
{
	for (;;) {
		struct psl__node *list = NULL;
		int i, total = 0, k = 0;
		pthread_mutex_lock(&deferred_mu);
		for (i = 0; i < ndeferred; i++) {
			int nid = deferred[i].list[deferred[i].k].id;
			if (id < 0 || nid == id ||
			    (id == 0 && now - deferred[i].since >= deferred_bound_ms()))
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
		if (id >= 0 && !drop && !psl__node_dead(psl__cur, list[k].id))
			tell_others(list, total, k);
		free(list);
	}
}

void psl__recovery_heard(int id)
{
	deferred_send(id, 0, false);
}

/* Scheduler: n takes a lost node's place, if there is one (true). */
static bool take(const struct psl__node *n)
{
	struct psl__node *list;
	int total, k, id;
	bool cxx_server = n->cxx && n->role == PSL_SERVER;
	char d[96];

	pthread_mutex_lock(&po.mu);
	total = po.nreg;
	k = po.state == PSL__READY ? lost_slot_locked(n) : -1;
	list = k < 0 ? NULL : calloc((size_t)total + 1, sizeof(*list));
	if (!list) {
		pthread_mutex_unlock(&po.mu);
		return false;
	}
	id = po.reg[k].id;
	po.reg[k] = *n;
	po.reg[k].id = id;
	po.reg[k].is_recovery = true;
	revive_locked(id, &po.reg[k]);
	memcpy(list, po.reg, sizeof(*list) * (size_t)total);
	list[total] = po.me;
	pthread_mutex_unlock(&po.mu);
	if (po.cfg.resend)
		psl__resender_forget_seen(psl__cur, id);
	deferred_send(id, 0, true); /* (news of a predecessor that never spoke) */
	if (psl__control_connect(psl__cur, &list[k], 1)) {
		psl__node_lost(id, -ECONNREFUSED, "the scheduler cannot connect to its replacement");
		free(list);
		return true;
	}
	PSL_INFO("the %s at %s:%d takes the place of lost %s%s", psl__role_name(n->role),
		 n->hostname, n->port, psl__node_desc(psl__cur, id, d, sizeof(d)),
		 cxx_server ? " (a C++ ps-lite server: the others hear of it at its first heartbeat)"
			    : "");
	/* a worker's news first: its first requests, sent once it has its
	 * list, find the servers knowing its new address (else they cannot
	 * answer them) */
	if (n->role == PSL_WORKER)
		tell_others(list, total, k);
	send_list(list, total + 1, id);
	if (cxx_server && defer(list, total, k))
		return true;
	if (n->role != PSL_WORKER)
		tell_others(list, total, k);
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
static bool hold(const struct psl__node *n)
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
			 psl__role_name(n->role), n->hostname, n->port, psl__recovery_bound_s(psl__cur),
			 psl__role_name(n->role));
	return i >= 0;
}

void psl__recovery_reset(void)
{
	pthread_mutex_lock(&waiting_mu);
	nwaiting = 0;
	pthread_mutex_unlock(&waiting_mu);
	deferred_send(-1, 0, true);
}

bool psl__recovery_take(const struct psl__node *n)
{
	if (!po.cfg.recovery)
		return false;
	return take(n) || hold(n);
}

void psl__recovery_retry(void)
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
		if (take(&n))
			waiting_drop(&n);
		else
			i++;
	}
}

void psl__recovery_tick(int64_t now)
{
	struct psl__node n;
	int i;

	/* a barrier that waited in vain for a lost node's replacement */
	psl__control_forget_node(psl__cur, 0);
	deferred_send(0, now, false);

	for (;;) {
		pthread_mutex_lock(&waiting_mu);
		for (i = 0; i < nwaiting; i++)
			if (now - waiting[i].since > psl__recovery_bound_s(psl__cur) * 1000LL)
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
			 psl__recovery_bound_s(psl__cur));
		psl__tell_refused(psl__cur, &n, "no %s of this job was lost within %d s: there is no place "
				      "to take (PS_RECOVERY=1; check DMLC_NUM_SERVER, "
				      "DMLC_NUM_WORKER and DMLC_RANK)",
				  psl__role_name(n.role), psl__recovery_bound_s(psl__cur));
	}
}

/* Node: whether an entry of the scheduler's news says what this node knows
 * already (a node list sent again: the scheduler, this node, a live peer at
 * the same address). */
static bool news_known(const struct psl__node *n)
{
	bool same;
	if (n->id < 1 || n->id > po.max_id)
		return false;
	pthread_mutex_lock(&po.mu);
	same = po.peers[n->id].known && !po.peers[n->id].dead &&
	       po.peers[n->id].node.port == n->port &&
	       !strcmp(po.peers[n->id].node.hostname, n->hostname);
	pthread_mutex_unlock(&po.mu);
	return same || (n->id == po.my_id && n->port == po.me.port &&
			!strcmp(n->hostname, po.me.hostname));
}

/* Node: one entry of the scheduler's news; false if it cannot be a server
 * or worker of this job. */
static bool news_entry_ok(const struct psl__node *n)
{
	if (n->id < 8 || n->id > po.max_id || n->id == po.my_id || !n->hostname[0] ||
	    n->port <= 0)
		return false;
	return n->role == PSL_SERVER ? psl__is_server_id(n->id)
	       : n->role == PSL_WORKER ? psl__is_worker_id(n->id)
				       : false;
}

void psl__recovery_news(const struct psl__meta *m)
{
	int i;
	char d[96];

	if (psl__auth_on(psl__cur) && (!po.nonce[0] || psl__auth_list_check(psl__cur, m, po.nonce))) {
		PSL_WARN("ignored news of a recovered node without a valid proof of PS_JOB_SECRET");
		return;
	}
	for (i = 0; i < m->node_size; i++) {
		const struct psl__node *n = &m->nodes[i];
		if (news_known(n))
			continue;
		if (!news_entry_ok(n)) {
			PSL_WARN("ignored an entry of the scheduler's news of a recovered node (id %d, "
				 "role %d, %s:%d): not another server or worker of this job",
				 n->id, n->role, n->hostname, n->port);
			continue;
		}
		/* what waits on its predecessor will never be answered */
		if (!psl__node_dead(psl__cur, n->id))
			psl__node_lost(n->id, -EHOSTDOWN, "a new node took its place");
		if (n->role != po.role && psl__control_connect(psl__cur, n, po.my_id))
			continue; /* (logged; it stays lost) */
		revive(n->id, n);
		PSL_INFO("%s is back (a new node took the lost one's place)",
			 psl__node_desc(psl__cur, n->id, d, sizeof(d)));
		psl__recovery_resend(psl__cur, n->id);
	}
}

int psl__recovery_wait(int id)
{
	int64_t end, now;
	bool tell = false;
	int rc;
	char d[96];

	pthread_mutex_lock(&po.mu);
	end = po.peers[id].down_at_ms + po.cfg.recovery_wait_s * 1000LL;
	while (po.peers[id].dead && !po.peers[1].dead && po.state == PSL__READY &&
	       (now = psl__now_ms()) < end)
		psl__cond_wait_ms(&po.cv, &po.mu, end - now < 200 ? end - now : 200);
	rc = !po.peers[id].dead ? 0 : po.peers[1].dead ? -ENOLINK : -EHOSTDOWN;
	if (rc == -EHOSTDOWN && !po.peers[id].wait_told)
		tell = po.peers[id].wait_told = true;
	pthread_mutex_unlock(&po.mu);
	if (tell)
		PSL_ERR("no node took the place of lost %s within PS_RECOVERY_WAIT=%d s: its "
			"requests fail with \"%s\" (restart it with the same role%s)",
			psl__node_desc(psl__cur, id, d, sizeof(d)), po.cfg.recovery_wait_s,
			psl_strerror(rc), po.cfg.preferred_rank >= 0 ? " and DMLC_RANK" : "");
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
