/*
 * libFuzzer target for the control-message handlers (registration, node
 * lists, barriers, heartbeats), built with ./configure --enable-fuzz
 * CC=clang. An input is
 *   [state][sender][meta bytes...]
 * state picks what this node is (bits 0-1: a scheduler registering, a
 * scheduler of a ready job, a worker registering, a server of a ready job;
 * bit 2: every node of the job registered already, for a scheduler);
 * sender the id the van saw (0: none, 1: the scheduler, else 7 + sender % 9).
 * The meta goes through the core's receive callback, as a van delivers it,
 * into a fresh node of 1 server and 2 workers whose van records nothing.
 * The seeds are in tests/fuzz/corpus/control. Anything the handlers do with
 * it must not crash or leak (AddressSanitizer, UndefinedBehaviorSanitizer).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "log.h"
#include "message.h"
#include "postoffice.h"
#include "van_host.h"

static int fake;

static int f_connect(struct psl_van *v, const struct psl_van_peer *p, int32_t my_id)
{
	(void)v;
	(void)p;
	(void)my_id;
	return 0;
}

static int f_send(struct psl_van *v, int32_t id, const void *meta, size_t meta_len,
		  const struct psl_van_seg *segs, uint32_t nseg, void *cookie)
{
	(void)v;
	(void)id;
	(void)meta;
	(void)meta_len;
	(void)segs;
	(void)nseg;
	if (cookie)
		psl__po.host.send_done(psl__po.host.ctx, cookie, 0);
	return 0;
}

static const struct psl_van_ops ops = {
	.abi_version = PSL_VAN_ABI_VERSION,
	.size = sizeof(struct psl_van_ops),
	.name = "fuzz",
	.connect = f_connect,
	.send = f_send,
};

static void release(struct psl_van_rmsg *m)
{
	(void)m;
}

static void node_up(int state)
{
	const int S = 1, W = 2;
	int id, g, kind = state & 3;
	struct psl__office *po = &psl__po;

	po->cfg.num_servers = po->cfg.server_groups = S;
	po->cfg.group_size = 1;
	po->cfg.num_workers = po->cfg.worker_groups = W;
	po->max_id = 7 + 2 * W;
	po->peers = calloc((size_t)po->max_id + 1, sizeof(*po->peers));
	po->lib.ops = &ops;
	po->van = (struct psl_van *)&fake;
	psl__host_init(po, &po->host);
	po->start_err = 0;
	po->got_node_list = false;
	po->leaving = po->final_released = false;
	memset(&po->me, 0, sizeof(po->me));
	snprintf(po->me.hostname, sizeof(po->me.hostname), "127.0.0.1");
	po->me.port = 9000;
	po->peers[1].known = true;
	if (kind <= 1) {
		po->role = PSL_SCHEDULER;
		po->my_id = po->me.id = 1;
		po->me.role = PSL_SCHEDULER;
		po->reg = calloc((size_t)(S + W), sizeof(*po->reg));
		po->nreg = 0;
		for (g = 0; g < 8; g++)
			po->barrier_senders[g] = calloc(2 * ((size_t)po->max_id + 1), sizeof(bool));
		if (state & 4) { /* every node registered: 127.0.0.1:5001.. */
			for (id = 0; id < S + W; id++) {
				struct psl__node *n = &po->reg[po->nreg++];
				n->role = id < S ? PSL_SERVER : PSL_WORKER;
				n->id = PSL_EMPTY;
				snprintf(n->hostname, sizeof(n->hostname), "127.0.0.1");
				n->port = 5001 + id;
			}
		}
	} else {
		po->role = kind == 2 ? PSL_WORKER : PSL_SERVER;
		po->me.role = po->role;
		po->my_id = po->me.id = kind == 2 ? PSL_EMPTY : 8;
		po->me.port = 5001;
	}
	if (kind == 1 || kind == 3) {
		for (id = 8; id <= po->max_id; id++) {
			po->peers[id].known = psl__group_has(po, PSL_GROUP_SERVERS | PSL_GROUP_WORKERS, id);
			po->peers[id].node.id = id;
			po->peers[id].node.role = id % 2 ? PSL_WORKER : PSL_SERVER;
			snprintf(po->peers[id].node.hostname, sizeof(po->peers[id].node.hostname),
				 "127.0.0.1");
			po->peers[id].node.port = 5000 + id;
		}
		po->got_node_list = true;
		po->state = PSL__READY;
	} else {
		po->state = PSL__STARTING;
	}
}

static void node_down(void)
{
	psl__control_reset(psl__cur);
	free(psl__po.peers);
	psl__po.peers = NULL;
	psl__po.max_id = 0;
	psl__po.state = PSL__STOPPED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct psl_van_rmsg m;
	uint8_t *meta;
	int sender;
	static int once;
	if (!once) {
		psl__log_init(0);
		psl__log_level = -1; /* nothing printed: the handlers' words are not checked */
		once = 1;
	}
	if (size < 2)
		return 0;
	sender = data[1] == 0 ? PSL_EMPTY : data[1] == 1 ? 1 : 7 + data[1] % 9;
	/* a buffer of exactly the meta's length, so that ASan sees overreads */
	meta = malloc(size - 2 ? size - 2 : 1);
	if (!meta)
		return 0;
	memcpy(meta, data + 2, size - 2);
	node_up(data[0]);
	memset(&m, 0, sizeof(m));
	m.sender = sender;
	m.meta = meta;
	m.meta_len = size - 2;
	m.release = release;
	psl__po.host.recv(psl__po.host.ctx, &m);
	node_down();
	free(meta);
	return 0;
}
