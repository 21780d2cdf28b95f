/* The control plane's entry points: a received control message goes to
 * registration, barriers or heartbeats; a van's peer events; the
 * scheduler's state reset. Above the parts it dispatches to. */
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

void psl__control_handle(struct psl__office *o, struct psl__meta *m, uint32_t nseg)
{
	if (nseg && m->cmd != PSL_CMD_ACK)
		PSL_DBG("control message %s from node %d carries %u data frames: ignored",
			psl__cmd_name(m->cmd), m->sender, nseg);
	switch (m->cmd) {
	case PSL_CMD_ADD_NODE:
		if (o->role == PSL_SCHEDULER)
			psl__scheduler_add_node(o, m);
		else
			psl__node_take_list(o, m);
		break;
	case PSL_CMD_BARRIER:
	case PSL_CMD_INSTANCE_BARRIER:
		psl__handle_barrier(o, m);
		break;
	case PSL_CMD_HEARTBEAT:
		psl__handle_heartbeat(o, m);
		break;
	case PSL_CMD_ACK:
		break; /* the resender's, when it is on */
	case PSL_CMD_TERMINATE:
		if (m->sender == 1 && o->role != PSL_SCHEDULER && m->body &&
		    m->body_size > (int)strlen(PSL__ABORT_TAG) &&
		    !strncmp(m->body, PSL__ABORT_TAG, strlen(PSL__ABORT_TAG))) {
			psl__control_take_abort(o, m);
			break;
		}
		if (m->sender == 1 && o->role != PSL_SCHEDULER && m->body &&
		    m->body_size > (int)strlen(PSL__REFUSED_TAG) &&
		    !strncmp(m->body, PSL__REFUSED_TAG, strlen(PSL__REFUSED_TAG))) {
			int tag = (int)strlen(PSL__REFUSED_TAG);
			pthread_mutex_lock(&o->mu);
			if (o->state == PSL__STARTING && !o->got_node_list) {
				pthread_mutex_unlock(&o->mu);
				psl__start_failed(o, -ECONNREFUSED,
					     "the scheduler at %s:%d refused this node's registration: "
					     "%.*s",
					     o->cfg.root_uri, o->cfg.root_port, m->body_size - tag,
					     m->body + tag);
				break;
			}
			pthread_mutex_unlock(&o->mu);
		}
		PSL_WARN("ignored TERMINATE from node %d: pslite nodes stop by finalize",
			 m->sender);
		break;
	default:
		PSL_WARN("ignored a %s message from node %d: not used by the ZMQ protocol",
			 psl__cmd_name(m->cmd), m->sender);
		break;
	}
}

void psl__control_peer_event(struct psl__office *o, int id, int event, int err, const char *detail)
{
	char d[96];
	bool starting;

	if (id < 1 || id > o->max_id)
		return;
	pthread_mutex_lock(&o->mu);
	starting = o->state == PSL__STARTING;
	if (event == PSL_VAN_PEER_UP) {
		o->peers[id].up = true;
		pthread_cond_broadcast(&o->cv);
		pthread_mutex_unlock(&o->mu);
		PSL_DBG("reached %s", psl__node_desc(o, id, d, sizeof(d)));
		return;
	}
	if (o->state != PSL__READY && !starting) {
		pthread_mutex_unlock(&o->mu);
		return; /* finalizing: peers go away */
	}
	pthread_mutex_unlock(&o->mu);
	if (event == PSL_VAN_PEER_MISMATCH) {
		if (id == 1 && starting && err && err != -EPROTO) {
			/* the same van, set up so that it cannot reach the scheduler
			 * (the detail names the setting) */
			psl__start_failed(o, err, "cannot register with the scheduler at %s:%d: %s",
				     o->cfg.root_uri, o->cfg.root_port,
				     detail ? detail : "its van cannot reach it");
			return;
		}
		if (id == 1 && starting) {
			char vc[96];
			psl__start_failed(o, -EPROTO,
				     "cannot register with the scheduler at %s:%d: %s, but this node "
				     "runs van '%s' (%s): start every node with the same "
				     "DMLC_ENABLE_RDMA",
				     o->cfg.root_uri, o->cfg.root_port,
				     detail ? detail : "its van does not answer this one", o->cfg.van,
				     psl__van_choice(&o->cfg, vc, sizeof(vc)));
			return;
		}
		psl__node_lost(o, id, -EPROTO, detail ? detail : "it speaks another van");
		return;
	}
	if (event == PSL_VAN_PEER_DOWN && o->role != PSL_SCHEDULER) {
		pthread_mutex_lock(&o->mu);
		if (o->leaving && !o->final_released) {
			if (!o->peers[id].down_pending_ms) {
				o->peers[id].down_pending_ms = psl__now_ms();
				o->peers[id].down_err = err ? err : -ECONNRESET;
			}
			pthread_mutex_unlock(&o->mu);
			return;
		}
		pthread_mutex_unlock(&o->mu);
	}
	if (event == PSL_VAN_PEER_DOWN) {
		char why[256];
		snprintf(why, sizeof(why), "connection lost%s%s", detail ? ": " : "",
			 detail ? detail : "");
		psl__node_lost(o, id, err ? err : -ECONNRESET, why);
	}
}

void psl__control_reset(struct psl__office *o)
{
	int g;
	psl__barrier_reset();
	psl__registration_reset();
	psl__recovery_reset(o);
	free(o->reg);
	o->reg = NULL;
	o->nreg = 0;
	for (g = 0; g < 8; g++) {
		free(o->barrier_senders[g]);
		o->barrier_senders[g] = NULL;
	}
}
