#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "customer.h"
#include "log.h"
#include "postoffice.h"
#include "resender.h"
#include "van_host.h"

#define po psl__po

/* ------------------------------------------------------------- helpers -- */

static struct psl_van_peer van_peer(const struct psl__node *n)
{
	struct psl_van_peer p = {
		.size = sizeof(p),
		.id = n->id,
		.role = n->role,
		.host = n->hostname,
		.port = n->port,
		.addr = n->addr,
		.addr_len = n->addr_len,
	};
	return p;
}

static int van_connect(const struct psl__node *n, int my_id)
{
	struct psl_van_peer p = van_peer(n);
	int rc = po.lib.ops->connect(po.van, &p, my_id);
	if (rc)
		PSL_ERR("cannot connect to node %d at %s:%d: %s", n->id, n->hostname, n->port,
			psl_strerror(rc));
	else
		PSL_DBG("connecting to node %d (%s) at %s:%d", n->id, psl__role_name(n->role),
			n->hostname, n->port);
	return rc;
}

/* With po.mu held: start-up failed with err (the first failure is kept). */
static void start_failed_locked(int err, const char *fmt, va_list ap)
{
	if (!po.start_err) {
		po.start_err = err;
		vsnprintf(po.start_msg, sizeof(po.start_msg), fmt, ap);
	}
	pthread_cond_broadcast(&po.cv);
}

static void start_failed(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void start_failed(int err, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&po.mu);
	va_start(ap, fmt);
	start_failed_locked(err, fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&po.mu);
}

/* The same, for a caller that holds po.mu. */
static void start_failed_held(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void start_failed_held(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	start_failed_locked(err, fmt, ap);
	va_end(ap);
}

/* -------------------------------------------------------- registration -- */

int psl__control_register(void)
{
	struct psl__meta m;
	psl__meta_init(&m);
	m.cmd = PSL_CMD_ADD_NODE;
	m.node_size = 1;
	m.nodes = &po.me;
	m.request = false;
	m.recver = 1;
	return psl__send_control(&m, true);
}

static int host_count(const char *h)
{
	int i, n = 0;
	for (i = 0; i < po.nreg; i++)
		n += !strcmp(po.reg[i].hostname, h);
	return n;
}

/* position of a node in BYTEPS_ORDERED_HOSTS ("ip[:port],..."), or a large
 * number when it is not listed */
static int ordered_pos(const struct psl__node *n)
{
	const char *p = po.cfg.ordered_hosts;
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

static int cmp_nodes(const void *a, const void *b)
{
	const struct psl__node *x = a, *y = b;
	int c;
	if (po.cfg.ordered_hosts[0]) {
		int px = ordered_pos(x), py = ordered_pos(y);
		if (px != py)
			return px < py ? -1 : 1;
	}
	if (po.cfg.mixed_mode) {
		int cx = host_count(x->hostname) == 1 ? 0 : 1;
		int cy = host_count(y->hostname) == 1 ? 0 : 1;
		if (cx != cy)
			return cx - cy;
	}
	c = strcmp(x->hostname, y->hostname);
	if (c)
		return -c; /* host name descending, as ps-lite sorts */
	return (x->port > y->port) - (x->port < y->port);
}

/* Assigns ranks and ids (WIRE.md 5.2). Called with po.mu held. */
static int assign_ids(void)
{
	int i, nr[2] = {0, 0};
	bool aux = false;
	bool *seen;

	qsort(po.reg, (size_t)po.nreg, sizeof(*po.reg), cmp_nodes);
	for (i = 0; i < po.nreg; i++)
		if (po.reg[i].aux_id != -1)
			aux = true;
	seen = calloc((size_t)po.nreg * 2, sizeof(bool));
	if (!seen) {
		start_failed_held(-ENOMEM, "out of memory assigning node ids");
		return -ENOMEM;
	}
	for (i = 0; i < po.nreg; i++) {
		struct psl__node *n = &po.reg[i];
		int cnt = n->role == PSL_SERVER ? po.cfg.num_servers : po.cfg.num_workers;
		int rank;
		if (aux) {
			rank = n->aux_id;
			if (rank < 0 || rank >= cnt || seen[n->role * po.nreg + rank]) {
				free(seen);
				/* po.mu is held here: start_failed would deadlock */
				start_failed_held(-EINVAL,
					     "DMLC_RANK=%d of the %s at %s:%d: with DMLC_RANK set, "
					     "every %s needs a distinct DMLC_RANK from 0 to %d",
					     n->aux_id, psl__role_name(n->role), n->hostname, n->port,
					     psl__role_name(n->role), cnt - 1);
				return -EINVAL;
			}
			seen[n->role * po.nreg + rank] = true;
		} else {
			rank = nr[n->role]++;
		}
		n->id = n->role == PSL_SERVER ? psl_server_rank_to_id(rank)
					      : psl_worker_rank_to_id(rank);
	}
	free(seen);
	for (i = 0; i < po.nreg; i++) {
		struct psl__peer *p = &po.peers[po.reg[i].id];
		p->node = po.reg[i];
		p->known = true;
		p->last_heartbeat_ms = psl__now_ms();
	}
	return 0;
}

/* Scheduler: every node registered; connect to each, send them the list. */
static void broadcast_node_list(void)
{
	int total = po.nreg, i, rc;
	struct psl__node *list = calloc((size_t)total + 1, sizeof(*list));
	int *order = malloc(sizeof(int) * (size_t)total);
	struct psl__meta m;

	if (!list || !order) {
		free(list);
		free(order);
		start_failed(-ENOMEM, "out of memory sending the node list");
		return;
	}
	memcpy(list, po.reg, sizeof(*list) * (size_t)total);
	list[total] = po.me; /* the scheduler comes last */
	for (i = 0; i < total; i++) {
		rc = van_connect(&po.reg[i], 1);
		if (rc) {
			start_failed(rc, "cannot connect to the %s at %s:%d: %s",
				     psl__role_name(po.reg[i].role), po.reg[i].hostname,
				     po.reg[i].port, psl_strerror(rc));
			goto out;
		}
	}
	/* workers ascending, then servers ascending (ps-lite's group 6 order) */
	rc = psl__group_members(6, order);
	for (i = 0; i < rc; i++) {
		psl__meta_init(&m);
		m.cmd = PSL_CMD_ADD_NODE;
		m.nodes = list;
		m.node_size = total + 1;
		m.recver = order[i];
		if (psl__send_control(&m, true))
			PSL_WARN("cannot send the node list to node %d", order[i]);
	}
	PSL_INFO("all %d nodes registered (%d servers, %d workers): node list sent", total,
		 po.cfg.num_servers, po.cfg.num_workers);
	atomic_store(&po.resend_live, true);
	pthread_mutex_lock(&po.mu);
	po.got_node_list = true;
	pthread_cond_broadcast(&po.cv);
	pthread_mutex_unlock(&po.mu);
out:
	free(list);
	free(order);
}

static void scheduler_add_node(const struct psl__meta *m)
{
	const struct psl__node *n;
	int i, total = po.cfg.num_servers + po.cfg.num_workers, have = 0, want;
	bool complete;

	if (m->sender != PSL_EMPTY) {
		PSL_WARN("ignored ADD_NODE from node %d: pslite does not recover lost nodes",
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
	pthread_mutex_lock(&po.mu);
	if (po.state != PSL__STARTING || po.got_node_list || po.nreg >= total) {
		pthread_mutex_unlock(&po.mu);
		PSL_WARN("ignored a registration from the %s at %s:%d: this job already has its "
			 "%d servers and %d workers (check DMLC_NUM_SERVER and DMLC_NUM_WORKER on "
			 "every node)",
			 psl__role_name(n->role), n->hostname, n->port, po.cfg.num_servers,
			 po.cfg.num_workers);
		return;
	}
	for (i = 0; i < po.nreg; i++) {
		if (!strcmp(po.reg[i].hostname, n->hostname) && po.reg[i].port == n->port) {
			pthread_mutex_unlock(&po.mu);
			PSL_WARN("ignored a second registration from %s:%d", n->hostname, n->port);
			return;
		}
		have += po.reg[i].role == n->role;
	}
	want = n->role == PSL_SERVER ? po.cfg.num_servers : po.cfg.num_workers;
	if (have >= want) {
		pthread_mutex_unlock(&po.mu);
		PSL_WARN("ignored a registration from the %s at %s:%d: %d %ss are registered "
			 "already and DMLC_NUM_%s=%d here (every node must have the same value)",
			 psl__role_name(n->role), n->hostname, n->port, have,
			 psl__role_name(n->role), n->role == PSL_SERVER ? "SERVER" : "WORKER",
			 want);
		return;
	}
	po.reg[po.nreg++] = *n;
	PSL_DBG("registered the %s at %s:%d (%d of %d nodes)", psl__role_name(n->role),
		n->hostname, n->port, po.nreg, total);
	complete = po.nreg == total && assign_ids() == 0;
	pthread_mutex_unlock(&po.mu);
	if (complete)
		broadcast_node_list();
}

/* Node: the scheduler's node list (WIRE.md 5.3). */
static void node_take_list(const struct psl__meta *m)
{
	int i, me = -1, ns = 0, nw = 0, sched = -1;

	if (m->sender != 1) {
		PSL_WARN("ignored ADD_NODE from node %d: only the scheduler sends node lists",
			 m->sender);
		return;
	}
	pthread_mutex_lock(&po.mu);
	if (po.state != PSL__STARTING || po.got_node_list) {
		pthread_mutex_unlock(&po.mu);
		PSL_WARN("ignored a node list that came after start-up: pslite does not recover "
			 "lost nodes");
		return;
	}
	pthread_mutex_unlock(&po.mu);
	for (i = 0; i < m->node_size; i++) {
		const struct psl__node *n = &m->nodes[i];
		if (n->id == PSL_EMPTY || n->hostname[0] == 0 || n->port <= 0) {
			start_failed(-EPROTO, "the scheduler's node list has an incomplete entry "
					      "(id %d, host '%s', port %d)",
				     n->id, n->hostname, n->port);
			return;
		}
		if (!strcmp(n->hostname, po.me.hostname) && n->port == po.me.port)
			me = i;
		if (n->role == PSL_SCHEDULER) {
			sched = i;
			if (n->id != 1) {
				start_failed(-EPROTO, "the scheduler's node list gives the scheduler id "
						      "%d, expected 1",
					     n->id);
				return;
			}
		} else if (n->role == PSL_SERVER) {
			ns++;
			if (!psl__is_server_id(n->id) || n->id > psl_server_rank_to_id(po.cfg.num_servers - 1)) {
				start_failed(-EPROTO, "the scheduler gave a server id %d, which does not "
						      "fit DMLC_NUM_SERVER=%d",
					     n->id, po.cfg.num_servers);
				return;
			}
		} else {
			nw++;
			if (!psl__is_worker_id(n->id) || n->id > psl_worker_rank_to_id(po.cfg.num_workers - 1)) {
				start_failed(-EPROTO, "the scheduler gave a worker id %d, which does not "
						      "fit DMLC_NUM_WORKER=%d",
					     n->id, po.cfg.num_workers);
				return;
			}
		}
	}
	if (ns != po.cfg.num_servers || nw != po.cfg.num_workers || sched < 0) {
		start_failed(-EPROTO,
			     "the scheduler's node list has %d servers and %d workers%s, but here "
			     "DMLC_NUM_SERVER=%d and DMLC_NUM_WORKER=%d: every node must have the "
			     "same values",
			     ns, nw, sched < 0 ? " and no scheduler" : "", po.cfg.num_servers,
			     po.cfg.num_workers);
		return;
	}
	if (me < 0) {
		start_failed(-EPROTO, "the scheduler's node list does not contain this node "
				      "(%s:%d)",
			     po.me.hostname, po.me.port);
		return;
	}
	for (i = 0; i < m->node_size; i++) {
		int k;
		for (k = 0; k < i; k++)
			if (m->nodes[k].id == m->nodes[i].id) {
				start_failed(-EPROTO,
					     "the scheduler's node list gives id %d to two nodes "
					     "(%s:%d and %s:%d)",
					     m->nodes[i].id, m->nodes[k].hostname, m->nodes[k].port,
					     m->nodes[i].hostname, m->nodes[i].port);
				return;
			}
	}
	pthread_mutex_lock(&po.mu);
	po.me.id = m->nodes[me].id;
	po.my_id = po.me.id;
	po.my_rank = psl_id_to_rank(po.my_id);
	for (i = 0; i < m->node_size; i++) {
		struct psl__peer *p = &po.peers[m->nodes[i].id];
		p->node = m->nodes[i];
		p->known = true;
	}
	po.peers[1].up = true; /* it just spoke to us */
	po.sched_last_heartbeat_ms = psl__now_ms();
	pthread_mutex_unlock(&po.mu);
	atomic_store(&po.resend_live, true);

	for (i = 0; i < m->node_size; i++) {
		const struct psl__node *n = &m->nodes[i];
		if (i == me || (n->role == po.role && n->role != PSL_SCHEDULER))
			continue;
		/* the scheduler's connection is re-opened under our new identity */
		if (van_connect(n, po.my_id)) {
			start_failed(-ECONNREFUSED, "cannot connect to node %d at %s:%d", n->id,
				     n->hostname, n->port);
			return;
		}
	}
	pthread_mutex_lock(&po.mu);
	po.got_node_list = true;
	pthread_cond_broadcast(&po.cv);
	pthread_mutex_unlock(&po.mu);
}

/* ------------------------------------------------------------ barriers -- */

static int arrived_index(int cmd)
{
	return cmd == PSL_CMD_INSTANCE_BARRIER ? 1 : 0;
}

static void release_local(int cmd, int g)
{
	pthread_mutex_lock(&po.mu);
	if (cmd == PSL_CMD_INSTANCE_BARRIER && g == PSL_GROUP_ALL && po.leaving)
		po.final_released = true;
	po.barrier_gen++;
	pthread_cond_broadcast(&po.cv);
	pthread_mutex_unlock(&po.mu);
}

/* Scheduler: since when a barrier of kind over group g has had arrivals, and
 * when barrier_watch last said so (ms, 0 = none). */
static int64_t barrier_since[8][2], barrier_warned[8][2];

/* Scheduler: who arrived at a barrier of kind (0 BARRIER, 1 INSTANCE) over
 * group g, indexed by node id. */
static bool *arrived(int kind, int g)
{
	return po.barrier_senders[g] + (kind ? po.max_id + 1 : 0);
}

/* Scheduler, with po.mu held: if every live member of group g arrived,
 * returns the number of recipients written into out (and resets). */
static int check_release_locked(int kind, int g, int *out)
{
	int n, i, k = 0;
	bool *a = arrived(kind, g);
	bool any = false;

	n = psl__group_members(g, out);
	for (i = 0; i < n; i++) {
		if (a[out[i]])
			any = true;
		else if (!po.peers[out[i]].dead)
			return 0;
	}
	if (!any)
		return 0;
	barrier_since[g][kind] = 0; /* released (see barrier_watch) */
	for (i = 0; i < n; i++) {
		int id = out[i];
		if (a[id]) {
			out[k++] = id; /* k <= i: compacting in place is safe */
			a[id] = false;
		}
	}
	return k;
}

bool psl__control_node_leaving(int id)
{
	bool r;
	(void)id;
	pthread_mutex_lock(&po.mu);
	r = po.final_released;
	pthread_mutex_unlock(&po.mu);
	return r;
}

/* A node waiting in its final barrier may see a peer leave before its own
 * release arrives (they travel on different connections): such a loss is
 * judged after a grace period, by the barrier's waiting loop. */
#define LEAVE_GRACE_MS 1500

static void judge_pending_losses(bool released)
{
	int id;
	int64_t now = psl__now_ms();
	for (id = 1; id <= po.max_id; id++) {
		int64_t t;
		int err;
		pthread_mutex_lock(&po.mu);
		t = po.peers[id].down_pending_ms;
		err = po.peers[id].down_err;
		if (t && (released || now - t >= LEAVE_GRACE_MS))
			po.peers[id].down_pending_ms = 0;
		pthread_mutex_unlock(&po.mu);
		if (!t)
			continue;
		if (released) {
			char d[96];
			PSL_DBG("%s left", psl__node_desc(id, d, sizeof(d)));
		} else if (now - t >= LEAVE_GRACE_MS) {
			psl__node_lost(id, err, "connection lost while this node waited in the final "
						"barrier");
		}
	}
}

static void send_releases(int cmd, int g, const int *ids, int n, int customer_id)
{
	int i;
	if (cmd == PSL_CMD_INSTANCE_BARRIER && g == PSL_GROUP_ALL && po.leaving) {
		pthread_mutex_lock(&po.mu);
		po.final_released = true;
		pthread_mutex_unlock(&po.mu);
	}
	for (i = 0; i < n; i++) {
		struct psl__meta m;
		if (ids[i] == 1) {
			release_local(cmd, g);
			continue;
		}
		psl__meta_init(&m);
		m.cmd = cmd;
		m.barrier_group = g;
		m.request = false;
		m.app_id = 0;
		m.customer_id = customer_id;
		m.recver = ids[i];
		if (psl__send_control(&m, true))
			PSL_WARN("cannot release node %d from the barrier", ids[i]);
	}
	PSL_DBG("barrier (%s, group %d) released %d node(s)", psl__cmd_name(cmd), g, n);
}

static void scheduler_arrive(int sender, int g, int cmd, int customer_id)
{
	int kind = arrived_index(cmd), n, *ids;

	ids = malloc(sizeof(int) * (size_t)(po.cfg.num_workers + po.cfg.num_servers + 1));
	if (!ids)
		return;
	pthread_mutex_lock(&po.mu);
	arrived(kind, g)[sender] = true;
	po.barrier_last_customer[g] = customer_id;
	n = check_release_locked(kind, g, ids);
	pthread_mutex_unlock(&po.mu);
	if (n)
		send_releases(cmd, g, ids, n, customer_id);
	free(ids);
}

void psl__control_forget_node(int id)
{
	int g, kind, n, *ids;
	(void)id;
	if (po.role != PSL_SCHEDULER)
		return;
	ids = malloc(sizeof(int) * (size_t)(po.cfg.num_workers + po.cfg.num_servers + 1));
	if (!ids)
		return;
	for (g = 1; g <= 7; g++) {
		for (kind = 0; kind < 2; kind++) {
			int cust;
			pthread_mutex_lock(&po.mu);
			n = po.barrier_senders[g] ? check_release_locked(kind, g, ids) : 0;
			cust = po.barrier_last_customer[g];
			pthread_mutex_unlock(&po.mu);
			if (n)
				send_releases(kind ? PSL_CMD_INSTANCE_BARRIER : PSL_CMD_BARRIER, g,
					      ids, n, cust);
		}
	}
	free(ids);
}

int psl__control_barrier(int customer_id, int group, int cmd)
{
	unsigned gen;
	int members, rc = 0;
	int *ids;

	if (group < 1 || group > 7)
		return -EINVAL;
	ids = malloc(sizeof(int) * (size_t)(po.cfg.num_workers + po.cfg.num_servers + 1));
	if (!ids)
		return -ENOMEM;
	members = psl__group_members(group, ids);
	free(ids);
	if (members <= 1 || !psl__group_has(group, po.my_id))
		return members <= 1 ? 0 : -EINVAL;
	pthread_mutex_lock(&po.mu);
	gen = po.barrier_gen;
	pthread_mutex_unlock(&po.mu);
	if (po.role == PSL_SCHEDULER) {
		scheduler_arrive(1, group, cmd, customer_id);
	} else {
		struct psl__meta m;
		psl__meta_init(&m);
		m.cmd = cmd;
		m.barrier_group = group;
		m.request = true;
		m.app_id = 0;
		m.customer_id = customer_id;
		m.recver = 1;
		rc = psl__send_control(&m, true);
		if (rc)
			return rc;
	}
	pthread_mutex_lock(&po.mu);
	while (po.barrier_gen == gen) {
		struct timespec ts;
		if (po.role != PSL_SCHEDULER && po.peers[1].dead &&
		    psl__now_ms() - po.peers[1].down_at_ms > 2000) {
			rc = -ECONNRESET;
			break;
		}
		if (po.leaving) {
			pthread_mutex_unlock(&po.mu);
			judge_pending_losses(false);
			pthread_mutex_lock(&po.mu);
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&po.cv, &po.mu, &ts);
	}
	pthread_mutex_unlock(&po.mu);
	if (po.leaving)
		judge_pending_losses(po.final_released);
	if (rc)
		PSL_ERR("barrier (group %d) failed: the scheduler at %s:%d was lost", group,
			po.cfg.root_uri, po.cfg.root_port);
	return rc;
}

/* ------------------------------------------------------------ dispatch -- */

static void handle_barrier(const struct psl__meta *m)
{
	if (po.role != PSL_SCHEDULER) {
		if (m->request || m->sender != 1) {
			PSL_WARN("ignored a %s from node %d: only the scheduler releases barriers",
				 psl__cmd_name(m->cmd), m->sender);
			return;
		}
		if (po.cfg.resend)
			psl__resender_released(m->cmd);
		/* a release's barrier_group is unspecified (a C++ scheduler leaves it
		 * uninitialised, WIRE.md 3.2, 5.4); an INSTANCE_BARRIER is always
		 * over every node (start-up and finalize) */
		release_local(m->cmd, m->cmd == PSL_CMD_INSTANCE_BARRIER ? PSL_GROUP_ALL
									 : m->barrier_group);
		return;
	}
	if (!m->request) {
		PSL_WARN("ignored a %s response from node %d", psl__cmd_name(m->cmd), m->sender);
		return;
	}
	if (m->barrier_group < 1 || m->barrier_group > 7 ||
	    !psl__group_has(m->barrier_group, m->sender)) {
		PSL_WARN("ignored a %s from node %d for group %d: not a member of that group",
			 psl__cmd_name(m->cmd), m->sender, m->barrier_group);
		return;
	}
	scheduler_arrive(m->sender, m->barrier_group, m->cmd, m->customer_id);
}

/*
 * A node that stops answering without closing its connections (hung, or its
 * host cut off) is caught by the scheduler's heartbeat timeout, but only the
 * scheduler sees that. So the scheduler tells every other node, in a
 * HEARTBEAT whose node list holds itself and then the lost node(s). A C++
 * ps-lite node only records a heartbeat time for each listed node (which it
 * uses for nothing but recovery), and a C++ scheduler never lists more than
 * itself, so this extends the protocol without breaking it.
 */
void psl__control_announce_lost(int id)
{
	struct psl__node list[2];
	int *ids, n, i;

	if (po.role != PSL_SCHEDULER || id < 8 || id > po.max_id)
		return;
	ids = malloc(sizeof(int) * (size_t)(po.cfg.num_workers + po.cfg.num_servers + 1));
	if (!ids)
		return;
	list[0] = po.me;
	list[1] = po.peers[id].node;
	n = psl__group_members(6, ids);
	for (i = 0; i < n; i++) {
		struct psl__meta m;
		if (ids[i] == id || psl__node_dead(ids[i]))
			continue;
		psl__meta_init(&m);
		m.cmd = PSL_CMD_HEARTBEAT;
		m.nodes = list;
		m.node_size = 2;
		m.recver = ids[i];
		psl__send_control(&m, true);
	}
	free(ids);
}

static void handle_heartbeat(const struct psl__meta *m)
{
	int64_t now = psl__now_ms();
	if (po.role == PSL_SCHEDULER) {
		struct psl__meta r;
		if (m->sender < 8 || m->sender > po.max_id || !po.peers[m->sender].known)
			return;
		pthread_mutex_lock(&po.mu);
		po.peers[m->sender].last_heartbeat_ms = now;
		pthread_mutex_unlock(&po.mu);
		psl__meta_init(&r);
		r.cmd = PSL_CMD_HEARTBEAT;
		r.nodes = &po.me;
		r.node_size = 1;
		r.recver = m->sender;
		psl__send_control(&r, true);
	} else if (m->sender == 1) {
		int i;
		pthread_mutex_lock(&po.mu);
		po.sched_last_heartbeat_ms = now;
		pthread_mutex_unlock(&po.mu);
		/* entries after the scheduler's own: nodes the scheduler lost */
		for (i = 1; i < m->node_size; i++) {
			int id = m->nodes[i].id;
			if (id == po.my_id)
				PSL_WARN("the scheduler declared this node lost: its heartbeats did not "
					 "arrive within PS_HEARTBEAT_TIMEOUT=%d s",
					 po.cfg.heartbeat_timeout);
			else if (id >= 8 && id <= po.max_id)
				/* (the announcement does not say why: its heartbeats
				 * stopped, or its connection to the scheduler closed) */
				psl__node_lost(id, -ETIMEDOUT,
					       "the scheduler declared it lost (its heartbeats "
					       "stopped or its connection closed)");
		}
	}
}

void psl__control_handle(struct psl__meta *m, uint32_t nseg)
{
	if (nseg && m->cmd != PSL_CMD_ACK)
		PSL_DBG("control message %s from node %d carries %u data frames: ignored",
			psl__cmd_name(m->cmd), m->sender, nseg);
	switch (m->cmd) {
	case PSL_CMD_ADD_NODE:
		if (po.role == PSL_SCHEDULER)
			scheduler_add_node(m);
		else
			node_take_list(m);
		break;
	case PSL_CMD_BARRIER:
	case PSL_CMD_INSTANCE_BARRIER:
		handle_barrier(m);
		break;
	case PSL_CMD_HEARTBEAT:
		handle_heartbeat(m);
		break;
	case PSL_CMD_ACK:
		break; /* the resender's, when it is on */
	case PSL_CMD_TERMINATE:
		PSL_WARN("ignored TERMINATE from node %d: pslite nodes stop by finalize",
			 m->sender);
		break;
	default:
		PSL_WARN("ignored a %s message from node %d: not used by the ZMQ protocol",
			 psl__cmd_name(m->cmd), m->sender);
		break;
	}
}

void psl__control_peer_event(int id, int event, int err, const char *detail)
{
	char d[96];
	bool starting;

	if (id < 1 || id > po.max_id)
		return;
	pthread_mutex_lock(&po.mu);
	starting = po.state == PSL__STARTING;
	if (event == PSL_VAN_PEER_UP) {
		po.peers[id].up = true;
		pthread_cond_broadcast(&po.cv);
		pthread_mutex_unlock(&po.mu);
		PSL_DBG("reached %s", psl__node_desc(id, d, sizeof(d)));
		return;
	}
	if (po.state != PSL__READY && !starting) {
		pthread_mutex_unlock(&po.mu);
		return; /* finalizing: peers go away */
	}
	pthread_mutex_unlock(&po.mu);
	if (event == PSL_VAN_PEER_MISMATCH) {
		if (id == 1 && starting && err && err != -EPROTO) {
			/* the same van, set up so that it cannot reach the scheduler
			 * (the detail names the setting) */
			start_failed(err, "cannot register with the scheduler at %s:%d: %s",
				     po.cfg.root_uri, po.cfg.root_port,
				     detail ? detail : "its van cannot reach it");
			return;
		}
		if (id == 1 && starting) {
			char vc[96];
			start_failed(-EPROTO,
				     "cannot register with the scheduler at %s:%d: %s, but this node "
				     "runs van '%s' (%s): start every node with the same "
				     "DMLC_ENABLE_RDMA",
				     po.cfg.root_uri, po.cfg.root_port,
				     detail ? detail : "its van does not answer this one", po.cfg.van,
				     psl__van_choice(&po.cfg, vc, sizeof(vc)));
			return;
		}
		psl__node_lost(id, -EPROTO, detail ? detail : "it speaks another van");
		return;
	}
	if (event == PSL_VAN_PEER_DOWN && po.role != PSL_SCHEDULER) {
		pthread_mutex_lock(&po.mu);
		if (po.leaving && !po.final_released) {
			if (!po.peers[id].down_pending_ms) {
				po.peers[id].down_pending_ms = psl__now_ms();
				po.peers[id].down_err = err ? err : -ECONNRESET;
			}
			pthread_mutex_unlock(&po.mu);
			return;
		}
		pthread_mutex_unlock(&po.mu);
	}
	if (event == PSL_VAN_PEER_DOWN) {
		char why[256];
		snprintf(why, sizeof(why), "connection lost%s%s", detail ? ": " : "",
			 detail ? detail : "");
		psl__node_lost(id, err ? err : -ECONNRESET, why);
	}
}

void psl__control_reset(void)
{
	int g;
	memset(barrier_since, 0, sizeof(barrier_since));
	memset(barrier_warned, 0, sizeof(barrier_warned));
	free(po.reg);
	po.reg = NULL;
	po.nreg = 0;
	for (g = 0; g < 8; g++) {
		free(po.barrier_senders[g]);
		po.barrier_senders[g] = NULL;
	}
}

/* --------------------------------------------------------------- timer -- */

static pthread_cond_t timer_cv = PTHREAD_COND_INITIALIZER;

/*
 * Scheduler, from the timer: a barrier that some nodes reached and others
 * have not for PS_BARRIER_WARN_S seconds is said once, naming the group and
 * the nodes missing, and again every PS_BARRIER_WARN_S seconds: nodes that
 * pass different barriers (a worker with one start-up barrier against
 * servers with two) would otherwise wait for ever in silence.
 */
static void barrier_watch(int64_t now)
{
	static const char *const gname[8] = {"",
					     "scheduler",
					     "servers",
					     "servers+scheduler",
					     "workers",
					     "workers+scheduler",
					     "workers+servers",
					     "workers+servers+scheduler"};
	int64_t limit = po.cfg.barrier_warn_s * 1000LL;
	int g, kind, i, n, *ids;

	ids = malloc(sizeof(int) * (size_t)(po.cfg.num_workers + po.cfg.num_servers + 1));
	if (!ids)
		return;
	for (g = 1; g <= 7; g++) {
		for (kind = 0; kind < 2; kind++) {
			char missing[512], d[96];
			size_t len = 0;
			int nin = 0, nmiss = 0;
			long long waited = 0;
			bool *a;

			missing[0] = 0;
			pthread_mutex_lock(&po.mu);
			if (!po.barrier_senders[g]) {
				pthread_mutex_unlock(&po.mu);
				continue;
			}
			a = arrived(kind, g);
			n = psl__group_members(g, ids);
			for (i = 0; i < n; i++)
				nin += a[ids[i]];
			if (!nin) {
				barrier_since[g][kind] = barrier_warned[g][kind] = 0;
			} else if (!barrier_since[g][kind]) {
				barrier_since[g][kind] = now;
				barrier_warned[g][kind] = 0;
			} else if (now - barrier_since[g][kind] >= limit &&
				   now - barrier_warned[g][kind] >= limit) {
				barrier_warned[g][kind] = now;
				waited = (now - barrier_since[g][kind]) / 1000;
				for (i = 0; i < n; i++) {
					if (a[ids[i]])
						continue;
					nmiss++;
					if (len < sizeof(missing) - 1)
						len += (size_t)snprintf(
							missing + len, sizeof(missing) - len, "%s%s",
							nmiss > 1 ? ", " : "",
							psl__node_desc(ids[i], d, sizeof(d)));
				}
			}
			pthread_mutex_unlock(&po.mu);
			if (nmiss)
				PSL_WARN("barrier (%s, group %d: %s) has waited %lld s: %d of %d "
					 "node(s) arrived, %d did not: %s (PS_BARRIER_WARN_S=%d)",
					 psl__cmd_name(kind ? PSL_CMD_INSTANCE_BARRIER
							    : PSL_CMD_BARRIER),
					 g, gname[g], waited, nin, n, nmiss, missing,
					 po.cfg.barrier_warn_s);
		}
	}
	free(ids);
}

static void timer_tick(int64_t now, int64_t *last_hb)
{
	const struct psl__config *c = &po.cfg;
	int id;

	if (po.role != PSL_SCHEDULER && c->heartbeat_interval > 0 &&
	    now - *last_hb >= c->heartbeat_interval * 1000LL) {
		struct psl__meta m;
		*last_hb = now;
		psl__meta_init(&m);
		m.cmd = PSL_CMD_HEARTBEAT;
		m.nodes = &po.me;
		m.node_size = 1;
		m.recver = 1;
		psl__send_control(&m, true);
	}
	if (c->heartbeat_timeout > 0 && c->heartbeat_interval > 0) {
		int64_t limit = c->heartbeat_timeout * 1000LL;
		if (po.role == PSL_SCHEDULER) {
			for (id = 8; id <= po.max_id; id++) {
				int64_t last;
				bool check;
				pthread_mutex_lock(&po.mu);
				check = po.peers[id].known && !po.peers[id].dead;
				last = po.peers[id].last_heartbeat_ms;
				pthread_mutex_unlock(&po.mu);
				if (check && now - last > limit) {
					char why[128];
					snprintf(why, sizeof(why),
						 "no heartbeat for %lld s (PS_HEARTBEAT_TIMEOUT=%d)",
						 (long long)((now - last) / 1000), c->heartbeat_timeout);
					psl__node_lost(id, -ETIMEDOUT, why);
				}
			}
		} else if (now - po.sched_last_heartbeat_ms > limit && !po.peers[1].dead) {
			char why[128];
			snprintf(why, sizeof(why),
				 "no heartbeat answer for %lld s (PS_HEARTBEAT_TIMEOUT=%d)",
				 (long long)((now - po.sched_last_heartbeat_ms) / 1000),
				 c->heartbeat_timeout);
			psl__node_lost(1, -ETIMEDOUT, why);
		}
	}
	if (c->resend)
		psl__resender_tick(now);
	if (po.role == PSL_SCHEDULER && c->barrier_warn_s > 0)
		barrier_watch(now);
}

static void *timer_main(void *arg)
{
	int64_t last_hb = 0;
	int period = 1000;
	(void)arg;
	if (po.cfg.heartbeat_interval > 0 && po.cfg.heartbeat_interval * 1000 < period)
		period = po.cfg.heartbeat_interval * 1000;
	if (po.cfg.resend && po.cfg.resend_timeout_ms / 2 < period)
		period = po.cfg.resend_timeout_ms / 2 > 10 ? po.cfg.resend_timeout_ms / 2 : 10;
	pthread_mutex_lock(&po.mu);
	while (!po.timer_stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += period / 1000;
		ts.tv_nsec += (long)(period % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&timer_cv, &po.mu, &ts);
		if (po.timer_stop)
			break;
		pthread_mutex_unlock(&po.mu);
		timer_tick(psl__now_ms(), &last_hb);
		pthread_mutex_lock(&po.mu);
	}
	pthread_mutex_unlock(&po.mu);
	return NULL;
}

int psl__timer_start(void)
{
	int rc;
	/* nothing to time: no thread (an idle node stays idle) */
	if (po.cfg.heartbeat_interval <= 0 && !po.cfg.resend &&
	    !(po.role == PSL_SCHEDULER && po.cfg.barrier_warn_s > 0))
		return 0;
	po.timer_stop = false;
	rc = pthread_create(&po.timer, NULL, timer_main, NULL);
	if (rc)
		return -rc;
	po.timer_running = true;
	return 0;
}

void psl__timer_stop(void)
{
	if (!po.timer_running)
		return;
	pthread_mutex_lock(&po.mu);
	po.timer_stop = true;
	pthread_cond_broadcast(&timer_cv);
	pthread_mutex_unlock(&po.mu);
	pthread_join(po.timer, NULL);
	po.timer_running = false;
}
