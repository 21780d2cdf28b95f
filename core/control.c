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

#define po psl__po

void psl__control_handle(struct psl__meta *m, uint32_t nseg)
{
	if (nseg && m->cmd != PSL_CMD_ACK)
		PSL_DBG("control message %s from node %d carries %u data frames: ignored",
			psl__cmd_name(m->cmd), m->sender, nseg);
	switch (m->cmd) {
	case PSL_CMD_ADD_NODE:
		if (po.role == PSL_SCHEDULER)
			psl__scheduler_add_node(psl__cur, m);
		else
			psl__node_take_list(psl__cur, m);
		break;
	case PSL_CMD_BARRIER:
	case PSL_CMD_INSTANCE_BARRIER:
		psl__handle_barrier(psl__cur, m);
		break;
	case PSL_CMD_HEARTBEAT:
		psl__handle_heartbeat(psl__cur, m);
		break;
	case PSL_CMD_ACK:
		break; /* the resender's, when it is on */
	case PSL_CMD_TERMINATE:
		if (m->sender == 1 && po.role != PSL_SCHEDULER && m->body &&
		    m->body_size > (int)strlen(PSL__ABORT_TAG) &&
		    !strncmp(m->body, PSL__ABORT_TAG, strlen(PSL__ABORT_TAG))) {
			psl__control_take_abort(psl__cur, m);
			break;
		}
		if (m->sender == 1 && po.role != PSL_SCHEDULER && m->body &&
		    m->body_size > (int)strlen(PSL__REFUSED_TAG) &&
		    !strncmp(m->body, PSL__REFUSED_TAG, strlen(PSL__REFUSED_TAG))) {
			int tag = (int)strlen(PSL__REFUSED_TAG);
			pthread_mutex_lock(&po.mu);
			if (po.state == PSL__STARTING && !po.got_node_list) {
				pthread_mutex_unlock(&po.mu);
				psl__start_failed(psl__cur, -ECONNREFUSED,
					     "the scheduler at %s:%d refused this node's registration: "
					     "%.*s",
					     po.cfg.root_uri, po.cfg.root_port, m->body_size - tag,
					     m->body + tag);
				break;
			}
			pthread_mutex_unlock(&po.mu);
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
		PSL_DBG("reached %s", psl__node_desc(psl__cur, id, d, sizeof(d)));
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
			psl__start_failed(psl__cur, err, "cannot register with the scheduler at %s:%d: %s",
				     po.cfg.root_uri, po.cfg.root_port,
				     detail ? detail : "its van cannot reach it");
			return;
		}
		if (id == 1 && starting) {
			char vc[96];
			psl__start_failed(psl__cur, -EPROTO,
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
	psl__barrier_reset();
	psl__registration_reset();
	psl__recovery_reset(psl__cur);
	free(po.reg);
	po.reg = NULL;
	po.nreg = 0;
	for (g = 0; g < 8; g++) {
		free(po.barrier_senders[g]);
		po.barrier_senders[g] = NULL;
	}
}
