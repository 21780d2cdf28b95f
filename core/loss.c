/* What a lost node means to this node: every part of the core that keeps
 * something for a peer lets go of it (psl__node_lost, through the node
 * table's loss hook, which psl__host_init sets), and whether a request may
 * be sent to a node now. */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "control.h"
#include "control_int.h"
#include "customer.h"
#include "ipc.h"
#include "log.h"
#include "postoffice.h"
#include "resender.h"

#define po psl__po

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
		rc = psl__recovery_wait(psl__cur, id);
	return rc;
}

void psl__loss_handle(int id, int err, const char *why)
{
	char d[96];
	bool leaving, cut, hold;
	if (id < 1 || id > po.max_id)
		return;
	psl__ipc_peer_lost(psl__cur, id);
	leaving = psl__control_node_leaving(psl__cur, id);
	hold = !leaving && psl__recovery_holds(psl__cur, id);
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
			 psl__node_desc(psl__cur, id, d, sizeof(d)), why);
	}
	pthread_cond_broadcast(&po.cv);
	pthread_mutex_unlock(&po.mu);
	if (leaving)
		PSL_DBG("%s left: %s", psl__node_desc(psl__cur, id, d, sizeof(d)), why);
	else if (cut)
		PSL_ERR("lost %s: %s; every request fails now with \"%s\"",
			psl__node_desc(psl__cur, id, d, sizeof(d)), why, psl_strerror(-ENOLINK));
	else if (hold)
		PSL_ERR("lost %s: %s; the requests in flight to it wait for its replacement",
			psl__node_desc(psl__cur, id, d, sizeof(d)), why);
	else
		PSL_ERR("lost %s: %s; requests waiting on it fail with \"%s\"",
			psl__node_desc(psl__cur, id, d, sizeof(d)), why, psl_strerror(err));
	/* the van lets go of it: what is in flight from it is dropped (a frozen
	 * server's rendezvous into a worker's buffers, over ucx, held the
	 * worker's requests until the server woke up) */
	if (!leaving && id != po.my_id && po.van && po.lib.ops && po.lib.ops->disconnect)
		po.lib.ops->disconnect(po.van, id);
	if (hold) {
		psl__recovery_hold(psl__cur, id, err ? err : -EHOSTDOWN);
	} else {
		psl__resender_forget(psl__cur, id);
		psl__customers_node_lost(psl__cur, id, err);
	}
	if (cut)
		psl__customers_node_lost(psl__cur, 0, -ENOLINK);
	/* the others hear of the loss before a barrier it releases (the final
	 * one, say) lets them go: they must not take it for a node that left */
	if (po.role == PSL_SCHEDULER && !leaving)
		psl__control_announce_lost(psl__cur, id, why);
	psl__control_forget_node(psl__cur, id);
	if (po.role == PSL_SCHEDULER && !leaving && po.cfg.recovery)
		psl__recovery_retry(psl__cur);
}
