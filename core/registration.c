/* Registration: a node's ADD_NODE to the scheduler; the scheduler's
 * collection of registrations, id assignment (BYTEPS_ORDERED_HOSTS, preferred
 * ranks) and node-list broadcast; a node taking the node list and connecting
 * to its peers. */
#define _GNU_SOURCE 1 /* qsort_r */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
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

/* A pslite node's view of the job's counts, in its registration's body
 * (after the proof of PS_JOB_SECRET, if any): "pslite-counts S W G" with
 * DMLC_NUM_SERVER, DMLC_NUM_WORKER and DMLC_GROUP_SIZE. C++ ps-lite ignores
 * the body of an ADD_NODE; a registration without it is not checked. */
#define COUNTS_TAG "pslite-counts "
/* a registration's body: the proof, the counts, the heartbeat promise */
#define REG_BODY_MAX (PSL__AUTH_BODY_MAX + 128)

struct counts {
	int s, w, g;
};

/* at the scheduler: nodes refused for other counts (refuse_other_counts) */
static struct counts odd;
static int nodd;

static void counts_body(struct psl__office *o, char *body, size_t len)
{
	size_t n = strlen(body);
	snprintf(body + n, len - n, "%s" COUNTS_TAG "%d %d %d", n ? "|" : "",
		 o->cfg.server_groups, o->cfg.worker_groups, o->cfg.group_size);
}

/* The counts a registration carries; false when it carries none. */
static bool counts_of(const struct psl__meta *m, struct counts *c)
{
	char b[REG_BODY_MAX];
	const char *p;
	if (!m->body || m->body_size <= 0 || m->body_size >= (int)sizeof(b))
		return false;
	memcpy(b, m->body, (size_t)m->body_size);
	b[m->body_size] = 0;
	p = strstr(b, COUNTS_TAG);
	return p && sscanf(p + strlen(COUNTS_TAG), "%d %d %d", &c->s, &c->w, &c->g) == 3;
}

/* Scheduler: a registration after the start may take a lost node's place,
 * with what its body says of it (a C++ node sends none). */
static bool recovery_take(struct psl__office *o, const struct psl__meta *m)
{
	struct psl__node n = m->nodes[0];
	struct counts c;
	n.hb_interval = psl__heartbeat_promised(m);
	n.cxx = !counts_of(m, &c);
	return psl__recovery_take(o, &n);
}

int psl__control_register(struct psl__office *o)
{
	struct psl__meta m;
	char body[REG_BODY_MAX] = "";
	int rc;
	psl__meta_init(&m);
	m.cmd = PSL_CMD_ADD_NODE;
	m.node_size = 1;
	m.nodes = &o->me;
	m.request = false;
	m.recver = 1;
	if (psl__auth_on(o)) {
		if (!o->nonce[0] && (rc = psl__auth_nonce_hex(o->nonce, 16)))
			return rc;
		if ((rc = psl__auth_register_body(o, &o->me, o->nonce, body)))
			return rc;
	}
	counts_body(o, body, sizeof(body));
	psl__heartbeat_promise(o, body, sizeof(body));
	m.body = body;
	m.body_size = (int)strlen(body);
	return psl__send_control(o, &m, true);
}

static int host_count(struct psl__office *o, const char *h)
{
	int i, n = 0;
	for (i = 0; i < o->nreg; i++)
		n += !strcmp(o->reg[i].hostname, h);
	return n;
}

/* position of a node in BYTEPS_ORDERED_HOSTS ("ip[:port],..."), or a large
 * number when it is not listed */
static int ordered_pos(struct psl__office *o, const struct psl__node *n)
{
	const char *p = o->cfg.ordered_hosts;
	int pos = 0;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char item[128];
		char *colon;
		if (len < sizeof(item)) {
			memcpy(item, p, len);
			item[len] = 0;
			colon = strchr(item, ':');
			if (colon)
				*colon = 0;
			if (!strcmp(item, n->hostname) && (!colon || atoi(colon + 1) == n->port))
				return pos;
		}
		pos++;
		p += len;
		if (*p == ',')
			p++;
	}
	return 1 << 30;
}

static int cmp_nodes(const void *a, const void *b, void *office)
{
	struct psl__office *o = office;
	const struct psl__node *x = a, *y = b;
	int c;
	if (o->cfg.ordered_hosts[0]) {
		int px = ordered_pos(o, x), py = ordered_pos(o, y);
		if (px != py)
			return px < py ? -1 : 1;
	}
	if (o->cfg.mixed_mode) {
		int cx = host_count(o, x->hostname) == 1 ? 0 : 1;
		int cy = host_count(o, y->hostname) == 1 ? 0 : 1;
		if (cx != cy)
			return cx - cy;
	}
	c = strcmp(x->hostname, y->hostname);
	if (c)
		return -c; /* host name descending, as ps-lite sorts */
	return (x->port > y->port) - (x->port < y->port);
}

/* Assigns ranks and ids (docs/wire.md 6.2). Called with o->mu held. */
static int assign_ids(struct psl__office *o)
{
	int i, nr[2] = {0, 0};
	bool aux = false;
	bool *seen;

	qsort_r(o->reg, (size_t)o->nreg, sizeof(*o->reg), cmp_nodes, o);
	for (i = 0; i < o->nreg; i++)
		if (o->reg[i].aux_id != -1)
			aux = true;
	seen = calloc((size_t)o->nreg * 2, sizeof(bool));
	if (!seen) {
		psl__start_failed_held(o, -ENOMEM, "out of memory assigning node ids");
		return -ENOMEM;
	}
	for (i = 0; i < o->nreg; i++) {
		struct psl__node *n = &o->reg[i];
		int cnt = n->role == PSL_SERVER ? o->cfg.num_servers : o->cfg.num_workers;
		int rank;
		if (aux) {
			rank = n->aux_id;
			if (rank < 0 || rank >= cnt || seen[n->role * o->nreg + rank]) {
				free(seen);
				/* o->mu is held here: start_failed would deadlock */
				psl__start_failed_held(o, -EINVAL,
					     "DMLC_RANK=%d of the %s at %s:%d: with DMLC_RANK set, "
					     "every %s needs a distinct DMLC_RANK from 0 to %d",
					     n->aux_id, psl__role_name(n->role), n->hostname, n->port,
					     psl__role_name(n->role), cnt - 1);
				return -EINVAL;
			}
			seen[n->role * o->nreg + rank] = true;
		} else {
			rank = nr[n->role]++;
		}
		n->id = n->role == PSL_SERVER ? psl_server_rank_to_id(rank)
					      : psl_worker_rank_to_id(rank);
	}
	free(seen);
	for (i = 0; i < o->nreg; i++) {
		struct psl__peer *p = &o->peers[o->reg[i].id];
		p->node = o->reg[i];
		p->known = true;
		p->last_heartbeat_ms = psl__now_ms();
	}
	return 0;
}

/* The van may hand up registrations before its bind returned to start-up
 * (lifecycle.c), and bind's result is the scheduler's own entry of the
 * list: wait for it, bounded (ucx_shm_data.sh: a node list whose scheduler
 * had port 0). */
static void wait_bound(struct psl__office *o)
{
	int64_t until = psl__now_ms() + 10000;
	pthread_mutex_lock(&o->mu);
	while (!o->me.port && psl__now_ms() < until) {
		struct timespec ts = {0, 5 * 1000000L};
		pthread_mutex_unlock(&o->mu);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&o->mu);
	}
	pthread_mutex_unlock(&o->mu);
}

/* Scheduler: every node registered; connect to each, send them the list. */
static void broadcast_node_list(struct psl__office *o)
{
	int total = o->nreg, i, rc;
	char body[PSL__AUTH_BODY_MAX]; /* the node list's proof, with a secret */
	struct psl__node *list = calloc((size_t)total + 1, sizeof(*list));
	int *order = malloc(sizeof(int) * (size_t)total);
	struct psl__meta m;

	if (!list || !order) {
		free(list);
		free(order);
		psl__start_failed(o, -ENOMEM, "out of memory sending the node list");
		return;
	}
	memcpy(list, o->reg, sizeof(*list) * (size_t)total);
	wait_bound(o);
	pthread_mutex_lock(&o->mu);
	list[total] = o->me; /* the scheduler comes last */
	pthread_mutex_unlock(&o->mu);
	for (i = 0; i < total; i++) {
		rc = psl__control_connect(o, &o->reg[i], 1);
		if (rc) {
			psl__start_failed(o, rc, "cannot connect to the %s at %s:%d: %s",
				     psl__role_name(o->reg[i].role), o->reg[i].hostname,
				     o->reg[i].port, psl_strerror(rc));
			goto out;
		}
		pthread_mutex_lock(&o->mu);
		o->list_connected = i + 1; /* (told if the start fails, control_fail.c) */
		pthread_mutex_unlock(&o->mu);
	}
	/* workers ascending, then servers ascending (ps-lite's group 6 order);
	 * each send's outcome counts down list_pending (psl__control_sent):
	 * the start completes when every one went out, and fails with the
	 * first that did not */
	rc = psl__group_members(o, 6, order);
	pthread_mutex_lock(&o->mu);
	o->list_pending = rc;
	pthread_mutex_unlock(&o->mu);
	for (i = 0; i < rc; i++) {
		psl__meta_init(&m);
		m.cmd = PSL_CMD_ADD_NODE;
		m.nodes = list;
		m.node_size = total + 1;
		m.recver = order[i];
		if (psl__auth_on(o)) {
			const char *nonce = psl__registration_nonce(&o->peers[order[i]].node);
			if (!nonce || psl__auth_list_body(o, list, total + 1, nonce, body)) {
				PSL_WARN("no proof of PS_JOB_SECRET for node %d's node list",
					 order[i]);
				pthread_mutex_lock(&o->mu);
				o->list_pending--;
				pthread_mutex_unlock(&o->mu);
				continue;
			}
			m.body = body;
			m.body_size = (int)strlen(body);
		}
		psl__send_control(o, &m, true); /* (a failure: psl__control_sent) */
	}
	PSL_INFO("all %d nodes registered (%d servers, %d workers): node list sent", total,
		 o->cfg.num_servers, o->cfg.num_workers);
	atomic_store(&o->resend_live, true);
	pthread_mutex_lock(&o->mu);
	o->list_sent = true; /* got_node_list once every send completed */
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
out:
	free(list);
	free(order);
}

void psl__registration_reset(void)
{
	psl__refusals_reset();
	nodd = 0;
}

/* Nodes refused for counts that differ from the scheduler's: when all of
 * them agree among themselves and as many came as their counts make a job,
 * the scheduler is the one started with other counts. */

/* "DMLC_NUM_SERVER=2 at the worker at h:p, but 1 at the scheduler at h:p" */
static int counts_diff(struct psl__office *o, const struct counts *c,
		       const struct psl__node *n, char *buf, size_t len)
{
	const char *var = c->s != o->cfg.server_groups ? "DMLC_NUM_SERVER"
			  : c->w != o->cfg.worker_groups ? "DMLC_NUM_WORKER"
							  : "DMLC_GROUP_SIZE";
	int here = c->s != o->cfg.server_groups ? o->cfg.server_groups
		   : c->w != o->cfg.worker_groups ? o->cfg.worker_groups
						   : o->cfg.group_size;
	int there = c->s != o->cfg.server_groups ? c->s : c->w != o->cfg.worker_groups ? c->w : c->g;
	return snprintf(buf, len, "%s=%d at the %s at %s:%d, but %s=%d at the scheduler at %s:%d",
			var, there, psl__role_name(n->role), n->hostname, n->port, var, here,
			o->cfg.root_uri, o->cfg.root_port);
}

/* Refuses a registration whose counts differ from the scheduler's; true if
 * it did. */
static bool refuse_other_counts(struct psl__office *o, const struct psl__meta *m,
				const struct psl__node *n)
{
	struct counts c;
	char why[300];
	int want;

	if (!counts_of(m, &c) || (c.s == o->cfg.server_groups && c.w == o->cfg.worker_groups &&
				  c.g == o->cfg.group_size))
		return false;
	counts_diff(o, &c, n, why, sizeof(why));
	PSL_ERR("refused the registration of the %s at %s:%d: %s: set the same value on every "
		"node", psl__role_name(n->role), n->hostname, n->port, why);
	psl__tell_refused(o, n, "%s: set the same value on every node", why);
	pthread_mutex_lock(&o->mu);
	if (nodd == 0 || (odd.s == c.s && odd.w == c.w && odd.g == c.g)) {
		odd = c;
		nodd++;
	} else {
		nodd = -1; /* the refused nodes disagree among themselves too */
	}
	want = (c.s + c.w) * (c.g > 0 ? c.g : 1);
	want = nodd >= want && o->nreg == 0 ? nodd : 0;
	pthread_mutex_unlock(&o->mu);
	if (want)
		psl__start_failed(o, -EINVAL,
				  "the scheduler's counts are the odd ones: all %d nodes that "
				  "registered have DMLC_NUM_SERVER=%d DMLC_NUM_WORKER=%d "
				  "DMLC_GROUP_SIZE=%d, but here DMLC_NUM_SERVER=%d DMLC_NUM_WORKER=%d "
				  "DMLC_GROUP_SIZE=%d: set the same values on the scheduler",
				  want, c.s, c.w, c.g, o->cfg.server_groups, o->cfg.worker_groups,
				  o->cfg.group_size);
	return true;
}

void psl__scheduler_add_node(struct psl__office *o, const struct psl__meta *m)
{
	const struct psl__node *n;
	int i, total = o->cfg.num_servers + o->cfg.num_workers, have = 0, want;
	bool complete;

	if (m->sender != PSL_EMPTY) {
		PSL_WARN("ignored ADD_NODE from node %d: only a node that has no id yet "
			 "registers (a node started again registers afresh)",
			 m->sender);
		return;
	}
	/* a registration must name one server or worker that can be reached:
	 * anything else would take a node's place and then fail the job's
	 * start when the scheduler cannot connect to it */
	if (m->node_size != 1 || m->nodes[0].id != PSL_EMPTY ||
	    (m->nodes[0].role != PSL_SERVER && m->nodes[0].role != PSL_WORKER) ||
	    !m->nodes[0].hostname[0] || m->nodes[0].port <= 0) {
		PSL_WARN("ignored a malformed registration (%d nodes, first id %d role %d host "
			 "'%s' port %d): expected one server or worker with id 32767, a host and "
			 "a port from 1 to 65535",
			 m->node_size, m->node_size ? m->nodes[0].id : -1,
			 m->node_size ? m->nodes[0].role : -1,
			 m->node_size ? m->nodes[0].hostname : "",
			 m->node_size ? m->nodes[0].port : -1);
		return;
	}
	n = &m->nodes[0];
	if (psl__auth_on(o)) {
		char nonce[33];
		if (psl__auth_register_check(o, m, nonce)) {
			PSL_WARN("ignored a registration from the %s at %s:%d: it carries no valid "
				 "proof of PS_JOB_SECRET (every node of the job needs the same secret)",
				 psl__role_name(n->role), n->hostname, n->port);
			return;
		}
		pthread_mutex_lock(&o->mu);
		psl__registration_keep_nonce(n, nonce);
		pthread_mutex_unlock(&o->mu);
	}
	if (refuse_other_counts(o, m, n))
		return;
	pthread_mutex_lock(&o->mu);
	if (o->state != PSL__STARTING || o->list_sent || o->nreg >= total) {
		pthread_mutex_unlock(&o->mu);
		if (recovery_take(o, m))
			return;
		PSL_WARN("ignored a registration from the %s at %s:%d: this job already has its "
			 "%d servers and %d workers (check DMLC_NUM_SERVER and DMLC_NUM_WORKER on "
			 "every node; %s)",
			 psl__role_name(n->role), n->hostname, n->port, o->cfg.num_servers,
			 o->cfg.num_workers,
			 o->cfg.recovery ? "PS_RECOVERY=1: no lost node of its role (and DMLC_RANK) "
					   "to replace"
					 : "set PS_RECOVERY=1 on the scheduler to let a node "
					   "started again take a lost one's place");
		psl__tell_refused(o, n,
			     "the job already has its %d servers and %d workers: another node "
			     "registered in this one's place (set the same PS_JOB_SECRET on every "
			     "node to keep strangers out), or DMLC_NUM_SERVER / DMLC_NUM_WORKER "
			     "differ between nodes",
			     o->cfg.num_servers, o->cfg.num_workers);
		return;
	}
	want = n->role == PSL_SERVER ? o->cfg.num_servers : o->cfg.num_workers;
	for (i = 0; i < o->nreg; i++) {
		const char *clash = NULL;
		if (!strcmp(o->reg[i].hostname, n->hostname) && o->reg[i].port == n->port) {
			pthread_mutex_unlock(&o->mu);
			PSL_WARN("ignored a second registration from %s:%d", n->hostname, n->port);
			return;
		}
		have += o->reg[i].role == n->role;
		/* DMLC_RANK: checked as each node comes, so that one bad or hostile
		 * registration is refused instead of failing the whole job's start */
		if ((o->reg[i].aux_id == -1) != (n->aux_id == -1))
			clash = "some nodes set DMLC_RANK and others do not: set it on every "
				"server and worker, or on none";
		else if (n->aux_id != -1 && o->reg[i].role == n->role &&
			 o->reg[i].aux_id == n->aux_id)
			clash = "another node of this role registered with the same DMLC_RANK "
				"(set the same PS_JOB_SECRET on every node to keep strangers out)";
		if (clash) {
			pthread_mutex_unlock(&o->mu);
			PSL_WARN("ignored a registration from the %s at %s:%d with DMLC_RANK=%d: %s",
				 psl__role_name(n->role), n->hostname, n->port, n->aux_id, clash);
			psl__tell_refused(o, n, "DMLC_RANK=%d: %s", n->aux_id, clash);
			return;
		}
	}
	if (n->aux_id < -1 || n->aux_id >= want) {
		pthread_mutex_unlock(&o->mu);
		PSL_WARN("ignored a registration from the %s at %s:%d: DMLC_RANK=%d, expected 0 "
			 "to %d (DMLC_NUM_%s=%d here)",
			 psl__role_name(n->role), n->hostname, n->port, n->aux_id, want - 1,
			 n->role == PSL_SERVER ? "SERVER" : "WORKER", want);
		psl__tell_refused(o, n, "DMLC_RANK=%d, expected 0 to %d (DMLC_NUM_%s=%d at the scheduler)",
			     n->aux_id, want - 1, n->role == PSL_SERVER ? "SERVER" : "WORKER",
			     want);
		return;
	}
	if (have >= want) {
		pthread_mutex_unlock(&o->mu);
		PSL_WARN("ignored a registration from the %s at %s:%d: %d %ss are registered "
			 "already and DMLC_NUM_%s=%d here (every node must have the same value)",
			 psl__role_name(n->role), n->hostname, n->port, have,
			 psl__role_name(n->role), n->role == PSL_SERVER ? "SERVER" : "WORKER",
			 want);
		psl__tell_refused(o, n,
			     "%d %ss are registered already and DMLC_NUM_%s=%d at the scheduler: "
			     "another node registered in this one's place (set the same "
			     "PS_JOB_SECRET on every node to keep strangers out), or the numbers "
			     "differ between nodes",
			     have, psl__role_name(n->role),
			     n->role == PSL_SERVER ? "SERVER" : "WORKER", want);
		return;
	}
	o->reg[o->nreg] = *n;
	o->reg[o->nreg++].hb_interval = psl__heartbeat_promised(m);
	PSL_DBG("registered the %s at %s:%d (%d of %d nodes)", psl__role_name(n->role),
		n->hostname, n->port, o->nreg, total);
	complete = o->nreg == total && assign_ids(o) == 0;
	pthread_mutex_unlock(&o->mu);
	if (complete)
		broadcast_node_list(o);
}

/* Node: the scheduler's node list (docs/wire.md 6.3). */
void psl__node_take_list(struct psl__office *o, const struct psl__meta *m)
{
	int i, me = -1, ns = 0, nw = 0, sched = -1;

	if (m->sender != 1) {
		PSL_WARN("ignored ADD_NODE from node %d: only the scheduler sends node lists",
			 m->sender);
		return;
	}
	pthread_mutex_lock(&o->mu);
	/* a node took a lost one's place; after this node's own list too, while
	 * its start is not over: two nodes that take places at once (a joint
	 * process, a host's server and worker) hear of each other */
	if (o->state == PSL__READY || (o->state == PSL__STARTING && o->got_node_list)) {
		pthread_mutex_unlock(&o->mu);
		psl__recovery_news(o, m);
		return;
	}
	if (o->state != PSL__STARTING) {
		pthread_mutex_unlock(&o->mu);
		PSL_WARN("ignored a node list that came while this node was not starting or "
			 "running (stopping)");
		return;
	}
	pthread_mutex_unlock(&o->mu);
	if (psl__auth_on(o) && (!o->nonce[0] || psl__auth_list_check(o, m, o->nonce))) {
		PSL_WARN("ignored a node list without a valid proof of PS_JOB_SECRET (does the "
			 "scheduler at %s:%d have the same secret?)",
			 o->cfg.root_uri, o->cfg.root_port);
		return;
	}
	for (i = 0; i < m->node_size; i++) {
		const struct psl__node *n = &m->nodes[i];
		if (n->id == PSL_EMPTY || n->hostname[0] == 0 || n->port <= 0) {
			psl__start_failed(o, -EPROTO, "the scheduler's node list has an incomplete entry "
					      "(id %d, host '%s', port %d)",
				     n->id, n->hostname, n->port);
			return;
		}
		if (!strcmp(n->hostname, o->me.hostname) && n->port == o->me.port)
			me = i;
		if (n->role == PSL_SCHEDULER) {
			sched = i;
			if (n->id != 1) {
				psl__start_failed(o, -EPROTO, "the scheduler's node list gives the scheduler id "
						      "%d, expected 1",
					     n->id);
				return;
			}
		} else if (n->role == PSL_SERVER) {
			ns++;
			if (!psl__is_server_id(n->id) || n->id > psl_server_rank_to_id(o->cfg.num_servers - 1)) {
				psl__start_failed(o, -EPROTO, "the scheduler gave a server id %d, which does not "
						      "fit DMLC_NUM_SERVER=%d",
					     n->id, o->cfg.num_servers);
				return;
			}
		} else {
			nw++;
			if (!psl__is_worker_id(n->id) || n->id > psl_worker_rank_to_id(o->cfg.num_workers - 1)) {
				psl__start_failed(o, -EPROTO, "the scheduler gave a worker id %d, which does not "
						      "fit DMLC_NUM_WORKER=%d",
					     n->id, o->cfg.num_workers);
				return;
			}
		}
	}
	if (ns != o->cfg.num_servers || nw != o->cfg.num_workers || sched < 0) {
		psl__start_failed(o, -EPROTO,
			     "the scheduler's node list has %d servers and %d workers%s, but here "
			     "DMLC_NUM_SERVER=%d and DMLC_NUM_WORKER=%d with DMLC_GROUP_SIZE=%d: "
			     "every node must have the same values",
			     ns, nw, sched < 0 ? " and no scheduler" : "", o->cfg.server_groups,
			     o->cfg.worker_groups, o->cfg.group_size);
		return;
	}
	if (me < 0) {
		psl__start_failed(o, -EPROTO, "the scheduler's node list does not contain this node "
				      "(%s:%d)",
			     o->me.hostname, o->me.port);
		return;
	}
	for (i = 0; i < m->node_size; i++) {
		int k;
		for (k = 0; k < i; k++)
			if (m->nodes[k].id == m->nodes[i].id) {
				psl__start_failed(o, -EPROTO,
					     "the scheduler's node list gives id %d to two nodes "
					     "(%s:%d and %s:%d)",
					     m->nodes[i].id, m->nodes[k].hostname, m->nodes[k].port,
					     m->nodes[i].hostname, m->nodes[i].port);
				return;
			}
	}
	pthread_mutex_lock(&o->mu);
	o->me.id = m->nodes[me].id;
	o->me.is_recovery = m->nodes[me].is_recovery;
	o->recovered = m->nodes[me].is_recovery;
	o->my_id = o->me.id;
	o->my_rank = psl_id_to_rank(o->my_id);
	o->cfg.instance = o->my_rank % (o->cfg.group_size > 0 ? o->cfg.group_size : 1);
	for (i = 0; i < m->node_size; i++) {
		struct psl__peer *p = &o->peers[m->nodes[i].id];
		p->node = m->nodes[i];
		p->known = true;
	}
	o->peers[1].up = true; /* it just spoke to us */
	o->sched_last_heartbeat_ms = psl__now_ms();
	pthread_mutex_unlock(&o->mu);
	atomic_store(&o->resend_live, true);

	for (i = 0; i < m->node_size; i++) {
		const struct psl__node *n = &m->nodes[i];
		if (i == me || (n->role == o->role && n->role != PSL_SCHEDULER))
			continue;
		/* the scheduler's connection is re-opened under our new identity */
		if (psl__control_connect(o, n, o->my_id)) {
			psl__start_failed(o, -ECONNREFUSED, "cannot connect to node %d at %s:%d", n->id,
				     n->hostname, n->port);
			return;
		}
	}
	pthread_mutex_lock(&o->mu);
	o->got_node_list = true;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}
