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

#define po psl__po

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

void psl__handle_heartbeat(const struct psl__meta *m)
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

/* The timer's heartbeat work: send ours, and judge who missed theirs. */
void psl__heartbeat_tick(int64_t now, int64_t *last_hb)
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
}
