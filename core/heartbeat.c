/* Heartbeats: nodes send theirs to the scheduler, which answers; either
 * side declares the other lost after PS_HEARTBEAT_TIMEOUT; the scheduler
 * announces lost nodes to the others. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "control_int.h"
#include "customer.h"
#include "log.h"
#include "postoffice.h"
#include "resender.h"
#include "van_host.h"

/* The body of a lost-node announcement: why the scheduler lost it (a C++
 * node ignores a HEARTBEAT's body). */
#define LOST_TAG "pslite-lost: "

/* A node's promise, in its registration's body: "pslite-heartbeat I", its
 * PS_HEARTBEAT_INTERVAL (0: it sends none). C++ ps-lite sends no such body,
 * and sends heartbeats only where PS_HEARTBEAT_INTERVAL is set. */
#define PROMISE_TAG "pslite-heartbeat "

void psl__heartbeat_promise(struct psl__office *o, char *body, size_t len)
{
	size_t n = strlen(body);
	snprintf(body + n, len - n, "%s" PROMISE_TAG "%d", n ? "|" : "",
		 o->cfg.heartbeat_interval);
}

int psl__heartbeat_promised(const struct psl__meta *m)
{
	char b[512];
	const char *p;
	int s;
	if (!m->body || m->body_size <= 0 || m->body_size >= (int)sizeof(b))
		return 0;
	memcpy(b, m->body, (size_t)m->body_size);
	b[m->body_size] = 0;
	p = strstr(b, PROMISE_TAG);
	if (!p || sscanf(p + strlen(PROMISE_TAG), "%d", &s) != 1 || s < 0)
		return 0;
	return s;
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
void psl__control_announce_lost(struct psl__office *o, int id, const char *why)
{
	struct psl__node list[2];
	char body[256];
	int *ids, n, i;

	if (o->role != PSL_SCHEDULER || id < 8 || id > o->max_id)
		return;
	ids = malloc(sizeof(int) * (size_t)(o->cfg.num_workers + o->cfg.num_servers + 1));
	if (!ids)
		return;
	list[0] = o->me;
	list[1] = o->peers[id].node;
	snprintf(body, sizeof(body), LOST_TAG "%s", why);
	n = psl__group_members(o, 6, ids);
	for (i = 0; i < n; i++) {
		struct psl__meta m;
		if (ids[i] == id || psl__node_dead(o, ids[i]))
			continue;
		psl__meta_init(&m);
		m.cmd = PSL_CMD_HEARTBEAT;
		m.nodes = list;
		m.node_size = 2;
		m.body = body;
		m.body_size = (int)strlen(body);
		m.recver = ids[i];
		psl__send_control(o, &m, true);
	}
	free(ids);
}

/*
 * Scheduler: a heartbeat from a node it declared lost, or from the old
 * holder of an id that a newcomer took since (its address is not the one
 * the id has now): a ghost, as a host cut off for longer than the
 * scheduler's heartbeat timeout but not its own, then reconnected, sends.
 * Its place is taken, or may be at any moment, and the others forgot it: it
 * is not answered, and is told to stop (once), so that it fails with the
 * reason instead of fighting its replacement for the id.
 */
static bool refused_ghost(struct psl__office *o, const struct psl__meta *m)
{
	const struct psl__peer *p = &o->peers[m->sender];
	struct psl__node at;
	char d[96], why[300];
	bool dead, moved;

	pthread_mutex_lock(&o->mu);
	dead = p->dead;
	moved = m->node_size >= 1 && (m->nodes[0].port != p->node.port ||
				      strcmp(m->nodes[0].hostname, p->node.hostname));
	at = m->node_size >= 1 ? m->nodes[0] : p->node;
	pthread_mutex_unlock(&o->mu);
	if (!dead && !moved)
		return false;
	psl__node_desc(o, m->sender, d, sizeof(d));
	snprintf(why, sizeof(why),
		 "the scheduler declared this node (%s:%d) lost earlier and does not take it back: "
		 "%s; start it again to take its place (PS_RECOVERY)",
		 at.hostname, at.port,
		 dead ? "its place waits for a new node" : "a new node took its place");
	if (psl__tell_ghost(o, &at, why))
		PSL_WARN("refused a heartbeat from %s:%d, under the id of %s, which was declared "
			 "lost: %s; told it to stop",
			 at.hostname, at.port, d,
			 dead ? "its place waits for a new node" : "a new node took its place");
	return true;
}

void psl__handle_heartbeat(struct psl__office *o, const struct psl__meta *m)
{
	int64_t now = psl__now_ms();
	if (o->role == PSL_SCHEDULER) {
		struct psl__meta r;
		bool over;
		if (m->sender < 8 || m->sender > o->max_id || !o->peers[m->sender].known)
			return;
		pthread_mutex_lock(&o->mu);
		over = o->final_released; /* (no answer to a node on its way out) */
		pthread_mutex_unlock(&o->mu);
		if (over || refused_ghost(o, m))
			return;
		pthread_mutex_lock(&o->mu);
		o->peers[m->sender].last_heartbeat_ms = now;
		pthread_mutex_unlock(&o->mu);
		psl__recovery_heard(o, m->sender);
		psl__meta_init(&r);
		r.cmd = PSL_CMD_HEARTBEAT;
		r.nodes = &o->me;
		r.node_size = 1;
		r.recver = m->sender;
		psl__send_control(o, &r, true);
	} else if (m->sender == 1) {
		int i;
		pthread_mutex_lock(&o->mu);
		o->sched_last_heartbeat_ms = now;
		pthread_mutex_unlock(&o->mu);
		/* entries after the scheduler's own: nodes the scheduler lost */
		char why[300] = "the scheduler declared it lost (its heartbeats stopped or its "
				"connection closed)";
		size_t tl = strlen(LOST_TAG);
		if (m->body && m->body_size > (int)tl && m->body_size < 200 &&
		    !strncmp(m->body, LOST_TAG, tl))
			snprintf(why, sizeof(why), "the scheduler declared it lost: %.*s",
				 m->body_size - (int)tl, m->body + tl);
		for (i = 1; i < m->node_size; i++) {
			int id = m->nodes[i].id;
			if (id == o->my_id)
				PSL_WARN("the scheduler declared this node lost: its heartbeats did not "
					 "arrive within PS_HEARTBEAT_TIMEOUT=%d s",
					 o->cfg.heartbeat_timeout);
			else if (id >= 8 && id <= o->max_id)
				/* (an older pslite scheduler does not say why) */
				psl__node_lost(o, id, -ETIMEDOUT, why);
		}
	}
}

/* a delivery that runs this long may hold heartbeat answers back */
#define LONG_DELIVERY_MS 1000

int64_t psl__delivery_begin(struct psl__office *o)
{
	int64_t now = psl__now_ms();
	atomic_store(&o->delivery_began_ms, now);
	atomic_fetch_add(&o->delivering, 1);
	return now;
}

void psl__delivery_end(struct psl__office *o, int64_t began)
{
	int64_t now = psl__now_ms();
	atomic_fetch_sub(&o->delivering, 1);
	if (now - began >= LONG_DELIVERY_MS)
		atomic_store(&o->long_delivery_end_ms, now);
}

/*
 * The time from which a silence is counted, given the last heartbeat (or
 * answer) seen; -1: judge nobody now. A handler that runs long on the
 * receive thread (user code may: ps-lite's handlers do their work there)
 * holds back the heartbeats that arrive meanwhile: they are not missing,
 * only not read yet. So while one runs long nobody is judged, and after it
 * the silence counts from its end.
 */
static int64_t silence_from(struct psl__office *o, int64_t now, int64_t last)
{
	int64_t end;
	if (atomic_load(&o->delivering) > 0 &&
	    now - atomic_load(&o->delivery_began_ms) >= LONG_DELIVERY_MS)
		return -1;
	end = atomic_load(&o->long_delivery_end_ms);
	return end > last ? end : last;
}

/* How long the scheduler waits for node id's heartbeats before it declares
 * it lost, in ms; 0: it does not judge it. A node is judged if it promised
 * heartbeats in its registration, or if PS_HEARTBEAT_INTERVAL is set here
 * (as in ps-lite, where it is set on every node); a C++ node sends none
 * unless that is set, and must not be lost for heartbeats it never sent. A
 * node that promised a long interval gets three of them. */
static int64_t node_limit_ms(struct psl__office *o, const struct psl__peer *p)
{
	int64_t limit = o->cfg.heartbeat_timeout * 1000LL;
	if (!p->known || p->dead || (!o->cfg.heartbeat_all && p->node.hb_interval <= 0))
		return 0;
	if (p->node.hb_interval * 3000LL > limit)
		limit = p->node.hb_interval * 3000LL;
	return limit;
}

/* Scheduler: declares lost the nodes whose heartbeats stopped. */
static void judge_nodes(struct psl__office *o, int64_t now)
{
	int id;
	for (id = 8; id <= o->max_id; id++) {
		int64_t last, limit;
		char why[200];
		pthread_mutex_lock(&o->mu);
		limit = node_limit_ms(o, &o->peers[id]);
		last = o->peers[id].last_heartbeat_ms;
		pthread_mutex_unlock(&o->mu);
		if (!limit || (last = silence_from(o, now, last)) < 0 || now - last <= limit)
			continue;
		snprintf(why, sizeof(why),
			 "no heartbeat for %lld s (PS_HEARTBEAT_TIMEOUT=%d at the scheduler: raise "
			 "it if the node is only slow, 0 turns this off)",
			 (long long)((now - last) / 1000), o->cfg.heartbeat_timeout);
		psl__node_lost(o, id, -ETIMEDOUT, why);
	}
}

/* Server, worker: declares the scheduler lost when its answers stopped. */
static void judge_scheduler(struct psl__office *o, int64_t now)
{
	char why[200];
	int64_t last;
	pthread_mutex_lock(&o->mu);
	last = o->sched_last_heartbeat_ms;
	pthread_mutex_unlock(&o->mu);
	if ((last = silence_from(o, now, last)) < 0 ||
	    now - last <= o->cfg.heartbeat_timeout * 1000LL || o->peers[1].dead)
		return;
	snprintf(why, sizeof(why),
		 "no heartbeat answer for %lld s (PS_HEARTBEAT_TIMEOUT=%d here: raise it if the "
		 "scheduler is only slow, 0 turns this off)",
		 (long long)((now - last) / 1000), o->cfg.heartbeat_timeout);
	psl__node_lost(o, 1, -ETIMEDOUT, why);
}

/* The timer's heartbeat work: send ours, and judge who missed theirs. */
void psl__heartbeat_tick(struct psl__office *o, int64_t now, int64_t *last_hb)
{
	const struct psl__config *c = &o->cfg;

	/* the final barrier released, nodes go: nothing to say or judge, and
	 * no message to a node on its way out (fewer sends in flight while the
	 * vans close) */
	if (psl__control_final_released(o))
		return;

	if (o->role != PSL_SCHEDULER && c->heartbeat_interval > 0 &&
	    now - *last_hb >= c->heartbeat_interval * 1000LL) {
		struct psl__meta m;
		*last_hb = now;
		psl__meta_init(&m);
		m.cmd = PSL_CMD_HEARTBEAT;
		m.nodes = &o->me;
		m.node_size = 1;
		m.recver = 1;
		psl__send_control(o, &m, true);
	}
	if (c->heartbeat_timeout <= 0 || c->heartbeat_interval <= 0)
		return;
	if (o->role == PSL_SCHEDULER)
		judge_nodes(o, now);
	else
		judge_scheduler(o, now);
}

/* Says at PS_VERBOSE=1 what this node's heartbeats are. */
void psl__heartbeat_say(struct psl__office *o)
{
	const struct psl__config *c = &o->cfg;
	if (c->heartbeat_interval <= 0 || c->heartbeat_timeout <= 0)
		PSL_DBG("heartbeats: %s; no peer is declared lost for missing ones "
			"(PS_HEARTBEAT_INTERVAL=%d, PS_HEARTBEAT_TIMEOUT=%d)",
			o->role != PSL_SCHEDULER && c->heartbeat_interval > 0 ? "sent" : "off",
			c->heartbeat_interval, c->heartbeat_timeout);
	else if (o->role == PSL_SCHEDULER)
		PSL_DBG("heartbeats: a %s silent for %d s is declared lost "
			"(PS_HEARTBEAT_TIMEOUT; 0 turns this off)",
			c->heartbeat_all ? "node" : "pslite node that sends them",
			c->heartbeat_timeout);
	else
		PSL_DBG("heartbeats: every %d s; the scheduler is declared lost after %d s "
			"without an answer (PS_HEARTBEAT_INTERVAL, PS_HEARTBEAT_TIMEOUT; 0 turns "
			"either off)",
			c->heartbeat_interval, c->heartbeat_timeout);
}

/* ------------------------------------------------------ psl_dead_nodes -- */

/* Whether watched node id counts as dead at now for psl_dead_nodes. */
static bool dead_for(struct psl__office *o, int id, int64_t now, int64_t t_ms)
{
	const struct psl__peer *p = &o->peers[id];
	int64_t last = id == 1 ? o->sched_last_heartbeat_ms : p->last_heartbeat_ms;
	bool hb = id == 1 ? o->cfg.heartbeat_interval > 0 : node_limit_ms(o, p) > 0;
	if (p->dead)
		return true;
	if (!hb || (id != 1 && !p->known) || (last = silence_from(o, now, last)) < 0)
		return false;
	return now - last > t_ms;
}

int psl_dead_nodes(int t_s, int *ids, int cap)
{
	struct psl__office *o;
	int64_t now = psl__now_ms();
	int id, lo, hi, n = 0;
	psl__clear_error();
	if (t_s < 0 || (cap > 0 && !ids))
		return PSL_FAIL(-EINVAL, PSL_LOG_WARN, "psl_dead_nodes: %s", t_s < 0 ?
				"t_s is negative: pass seconds, 0 or more" :
				"ids is NULL: pass an array of cap ints");
	o = psl__enter_selected();
	if (o->state != PSL__READY || !o->peers)
		return PSL_FAIL(-ESHUTDOWN, PSL_LOG_WARN, "psl_dead_nodes: pslite is not started "
				"on this node: call it between psl_start and psl_finalize");
	if (t_s == 0)
		return 0;
	lo = o->role == PSL_SCHEDULER ? 8 : 1;
	hi = o->role == PSL_SCHEDULER ? o->max_id : 1;
	pthread_mutex_lock(&o->mu);
	for (id = lo; id <= hi; id++) {
		if (!dead_for(o, id, now, t_s * 1000LL))
			continue;
		if (n < cap)
			ids[n] = id;
		n++;
	}
	pthread_mutex_unlock(&o->mu);
	return n;
}
