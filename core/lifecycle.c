/* Start-up and finalize: a node (two for the joint role, a whole instance
 * group for psl_start_group) registers, waits
 * for the node list and the start-up barrier, and leaves after the final
 * barrier. Above the node table (postoffice.c). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control.h"
#include "control_int.h"
#include "customer.h"
#include "log.h"
#include "ipc.h"
#include "postoffice.h"
#include "resender.h"

#define po psl__po

static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;

static int wait_ms(int64_t ms)
{
	return psl__cond_wait_ms(&po.cv, &po.mu, ms);
}

/* Scheduler: wait until every node registered and got the list. */
static int wait_registrations(void)
{
	int64_t t0 = psl__now_ms(), next_log = t0 + 10000;
	int total = po.cfg.num_servers + po.cfg.num_workers, rc = 0;
	const char *xg = po.cfg.group_size > 1 ? " x DMLC_GROUP_SIZE" : "";

	pthread_mutex_lock(&po.mu);
	while (!po.got_node_list && !po.start_err) {
		int64_t now = psl__now_ms();
		if (po.list_sent && po.list_pending <= 0) {
			po.got_node_list = true; /* every node list went out */
			break;
		}
		if (po.list_sent && now - t0 > po.cfg.start_timeout_s * 1000LL) {
			snprintf(po.start_msg, sizeof(po.start_msg),
				 "%d of the node list's sends did not complete within %d s "
				 "(PS_START_TIMEOUT): the van did not say whether they went out",
				 po.list_pending, po.cfg.start_timeout_s);
			po.start_err = -ETIMEDOUT;
			break;
		}
		if (now - t0 > po.cfg.start_timeout_s * 1000LL || now >= next_log) {
			int i, ns = 0, nw = 0;
			for (i = 0; i < po.nreg; i++) {
				if (po.reg[i].role == PSL_SERVER)
					ns++;
				else
					nw++;
			}
			if (now - t0 > po.cfg.start_timeout_s * 1000LL) {
				snprintf(po.start_msg, sizeof(po.start_msg),
					 "only %d of %d servers (DMLC_NUM_SERVER%s) and %d of %d workers "
					 "(DMLC_NUM_WORKER%s) registered within %d s (PS_START_TIMEOUT): "
					 "start the missing nodes with DMLC_PS_ROOT_URI=%s "
					 "DMLC_PS_ROOT_PORT=%d%s, or raise PS_START_TIMEOUT%s%s",
					 ns, po.cfg.num_servers, xg, nw, po.cfg.num_workers, xg,
					 po.cfg.start_timeout_s, po.cfg.root_uri, po.cfg.root_port,
					 po.cfg.secret_len ? " and the same PS_JOB_SECRET" : "",
					 po.refused[0] ? "; refused: " : "", po.refused);
				po.start_err = -ETIMEDOUT;
				break;
			}
			PSL_INFO("waiting for nodes to register: %d of %d servers, %d of %d workers",
				 ns, po.cfg.num_servers, nw, po.cfg.num_workers);
			next_log = now + 10000;
		}
		wait_ms(250);
	}
	rc = po.start_err;
	pthread_mutex_unlock(&po.mu);
	(void)total;
	return rc;
}

#define ABORT_GRACE_MS 1000

/* Server or worker: contacting the scheduler failed at once. The van's
 * reason for it may still be on its way from its thread: wait for it up to
 * grace_ms. Returns it (po.start_msg says it) or 0. */
static int van_reason_within(int64_t grace_ms)
{
	int64_t end = psl__now_ms() + grace_ms;
	int why;

	pthread_mutex_lock(&po.mu);
	while (!po.start_err && psl__now_ms() < end)
		wait_ms(20);
	why = po.start_err;
	pthread_mutex_unlock(&po.mu);
	return why;
}

/* Server or worker: reach the scheduler, register, wait for the list. */
static int wait_node_list(void)
{
	int64_t t0 = psl__now_ms(), next_log = t0 + 10000;
	int rc = 0;

	pthread_mutex_lock(&po.mu);
	while (!po.got_node_list && !po.start_err) {
		int64_t now = psl__now_ms();
		/* a scheduler that gives up says why (PSL__ABORT_TAG) as it closes:
		 * its reason may arrive just after its connection dropped */
		if (po.peers[1].dead && now - po.peers[1].down_at_ms >= ABORT_GRACE_MS) {
			snprintf(po.start_msg, sizeof(po.start_msg),
				 "lost the connection to the scheduler at %s:%d while registering",
				 po.cfg.root_uri, po.cfg.root_port);
			po.start_err = -ECONNRESET;
			break;
		}
		if (po.reg_send_err && now - po.reg_send_at_ms >= ABORT_GRACE_MS) {
			snprintf(po.start_msg, sizeof(po.start_msg), "%s", po.reg_send_msg);
			po.start_err = po.reg_send_err;
			break;
		}
		if (!po.peers[1].up && now - t0 > po.cfg.connect_timeout_s * 1000LL) {
			snprintf(po.start_msg, sizeof(po.start_msg),
				 "cannot reach the scheduler at %s:%d (DMLC_PS_ROOT_URI, "
				 "DMLC_PS_ROOT_PORT) within %d s (PS_CONNECT_TIMEOUT): is it running, "
				 "and are the address and port right?",
				 po.cfg.root_uri, po.cfg.root_port, po.cfg.connect_timeout_s);
			po.start_err = -ETIMEDOUT;
			break;
		}
		if (now - t0 > po.cfg.start_timeout_s * 1000LL) {
			snprintf(po.start_msg, sizeof(po.start_msg),
				 "registered with the scheduler at %s:%d, but the node list did not "
				 "come within %d s (PS_START_TIMEOUT): are all %d servers and %d "
				 "workers started, with the same DMLC_NUM_SERVER and DMLC_NUM_WORKER%s?",
				 po.cfg.root_uri, po.cfg.root_port, po.cfg.start_timeout_s,
				 po.cfg.num_servers, po.cfg.num_workers,
				 po.cfg.secret_len ? " and the same PS_JOB_SECRET" : "");
			po.start_err = -ETIMEDOUT;
			break;
		}
		if (now >= next_log) {
			PSL_INFO("%s the scheduler at %s:%d ...",
				 po.peers[1].up ? "registered; waiting for the other nodes via"
						: "still trying to reach",
				 po.cfg.root_uri, po.cfg.root_port);
			next_log = now + 10000;
		}
		wait_ms(200);
	}
	rc = po.start_err;
	pthread_mutex_unlock(&po.mu);
	return rc;
}

/* The start-up bookkeeping of po, as before a start (teardown holds mu;
 * start_node runs before the van can call in). */
static void clear_start_state(void)
{
	po.got_node_list = false;
	po.list_sent = false;
	po.list_pending = 0;
	po.list_connected = 0;
	po.barrier_err = 0;
	po.barrier_msg[0] = 0;
	po.start_err = 0;
}

static void teardown(void)
{
	int64_t t0;
	/* with PS_RESEND, what we sent last (the scheduler's releases of the
	 * final barrier) may still need a resend: wait for the ACKs, bounded */
	if (po.cfg.resend && po.state == PSL__READY && po.timer_running) {
		int64_t limit = 12LL * po.cfg.resend_timeout_ms, t = psl__now_ms();
		if (limit > 15000)
			limit = 15000;
		while (psl__resender_pending(psl__cur) > 0 && psl__now_ms() - t < limit) {
			struct timespec ts = {0, 20 * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	pthread_mutex_lock(&po.mu);
	po.state = PSL__FINALIZING;
	pthread_mutex_unlock(&po.mu);
	psl__timer_stop(psl__cur);
	t0 = psl__now_ms();
	psl__drive_stop(&po);
	if (po.van)
		po.lib.ops->fini(po.van);
	PSL_DBG("van stopped in %lld ms", (long long)(psl__now_ms() - t0));
	po.van = NULL;
	psl__customers_node_lost(psl__cur, 0, -ESHUTDOWN);
	psl__customer_drop_held(psl__cur);
	if (po.cfg.resend)
		psl__resender_fini(psl__cur);
	psl__ipc_stop(psl__cur); /* (held messages pointed into peers' rings) */
	psl__van_close(&po.lib);
	psl__control_reset(psl__cur);
	pthread_mutex_lock(&po.mu);
	free(po.peers);
	po.peers = NULL;
	po.max_id = 0;
	po.state = PSL__STOPPED;
	po.my_id = -1;
	po.my_rank = -1;
	clear_start_state();
	po.start_msg[0] = 0;
	po.reg_send_err = 0;
	po.reg_send_msg[0] = 0;
	po.refused[0] = 0;
	po.leaving = false;
	po.final_released = false;
	atomic_store(&po.resend_live, false);
	pthread_mutex_unlock(&po.mu);
}

static const char *port_var(void)
{
	return po.role == PSL_SCHEDULER ? "DMLC_PS_ROOT_PORT" : "DMLC_PORT";
}

/* Starts the current node up to its registration (a scheduler: up to
 * listening); finish_start waits for the job. joint_role: the node's role
 * in a DMLC_ROLE=joint process; instance: its index in the group this
 * process runs (psl_start_group), -1 if the process is one instance. */
static int start_node(int joint_role, int instance)
{
	char err[1024], vc[96];
	unsigned van_errors;
	struct psl_van_bind_req breq;
	struct psl_van_bind_res bres;
	int rc, g;

	rc = psl__config_load_inst(&po.cfg, joint_role, instance, err, sizeof(err));
	if (rc) {
		PSL_FAIL(0, PSL_LOG_ERROR, "%s", err);
		return rc;
	}
	psl__log_init(po.cfg.verbose);
	po.role = po.cfg.role;
	psl__log_set_who(psl__role_name(po.role));
	if (po.cfg.malloc_tune && psl__malloc_tune())
		PSL_DBG("PS_MALLOC_TUNE=1: malloc keeps freed memory for reuse (mmap "
			"threshold 32 MiB, trim threshold 64 MiB)");
	po.max_id = 7 + 2 * po.cfg.num_workers;
	if (6 + 2 * po.cfg.num_servers > po.max_id)
		po.max_id = 6 + 2 * po.cfg.num_servers;
	po.peers = calloc((size_t)po.max_id + 1, sizeof(*po.peers));
	if (!po.peers)
		return -ENOMEM;
	if (po.role == PSL_SCHEDULER) {
		int total = po.cfg.num_servers + po.cfg.num_workers;
		po.reg = calloc((size_t)total, sizeof(*po.reg));
		if (!po.reg)
			return -ENOMEM;
		for (g = 1; g <= 7; g++) {
			po.barrier_senders[g] = calloc(2 * ((size_t)po.max_id + 1), sizeof(bool));
			if (!po.barrier_senders[g])
				return -ENOMEM;
		}
	}

	rc = psl__van_open(po.cfg.van, &po.lib, err, sizeof(err));
	if (rc) {
		PSL_FAIL(0, PSL_LOG_ERROR, "%s: %s", psl__van_choice(&po.cfg, vc, sizeof(vc)), err);
		return rc;
	}
	psl__host_init(psl__cur, &po.host);
	van_errors = psl__van_errors();
	if (po.cfg.group_size > 1 && po.role != PSL_SCHEDULER) {
		/* read by config_load for the instance's rank: no compatibility WARN */
		psl__env_note_read("DMLC_NODE_RANK");
		psl__env_note_read("STEPMESH_GPU");
		psl__env_note_read("DMLC_RANK_OFFSET");
	}
	atomic_store(&po.drive_off, false);
	rc = po.lib.ops->init(&po.host, &po.van);
	if (rc) {
		po.van = NULL;
		if (rc != -ENODEV && psl__van_errors() != van_errors) {
			/* the van said why, naming the setting: one ERROR line is enough */
			PSL_INFO("%s: the van did not start (%s): see the van's message above",
				 psl__van_choice(&po.cfg, vc, sizeof(vc)), psl_strerror(rc));
			psl__set_error("%s", psl__van_last_error(err, sizeof(err)));
		} else if (rc == -ENODEV) {
			PSL_INFO("van '%s' (%s) found no device it can use on this machine",
				 po.cfg.van, po.lib.path);
			PSL_FAIL(0, PSL_LOG_ERROR, "%s: the '%s' van cannot run here (no device): choose another "
				"van with DMLC_ENABLE_RDMA (pslite-info lists them)",
				psl__van_choice(&po.cfg, vc, sizeof(vc)), po.cfg.van);
		} else {
			PSL_FAIL(0, PSL_LOG_ERROR, "%s: the van failed to start: %s",
				psl__van_choice(&po.cfg, vc, sizeof(vc)), psl_strerror(rc));
		}
		return rc;
	}
	memset(&po.caps, 0, sizeof(po.caps));
	po.caps.size = sizeof(po.caps);
	po.lib.ops->query(po.van, &po.caps);
	if (po.cfg.resend && (rc = psl__resender_init(psl__cur, po.cfg.resend_timeout_ms, po.cfg.recovery)))
		return rc;

	memset(&po.me, 0, sizeof(po.me));
	po.me.role = po.role;
	po.me.id = po.role == PSL_SCHEDULER ? 1 : PSL_EMPTY;
	snprintf(po.me.hostname, sizeof(po.me.hostname), "%s", po.cfg.node_host);
	po.me.aux_id = po.cfg.preferred_rank;
	po.me.customer_id = 0;
	po.my_id = po.me.id;
	clear_start_state();
	po.recovered = false;
	po.job_lost_err = 0;
	po.job_lost_msg[0] = 0;
	atomic_store(&po.van_ts, 0);
	po.state = PSL__STARTING;

	breq = (struct psl_van_bind_req){
		.size = sizeof(breq),
		.role = po.role,
		.host = po.cfg.node_host,
		.port = po.cfg.port,
	};
	memset(&bres, 0, sizeof(bres));
	if (po.role == PSL_SCHEDULER) {
		po.peers[1].node = po.me;
		po.peers[1].known = true;
		po.peers[1].up = true;
	}
	rc = po.lib.ops->bind(po.van, &breq, &bres);
	if (rc == -EADDRINUSE) {
		PSL_FAIL(0, PSL_LOG_ERROR, "%s=%d: port %d on %s is already in use: choose a free port%s", port_var(),
			po.cfg.port, po.cfg.port, po.cfg.node_host,
			po.role == PSL_SCHEDULER ? "" : ", or leave DMLC_PORT unset");
		return rc;
	} else if (rc) {
		PSL_FAIL(0, PSL_LOG_ERROR, "cannot listen on %s:%d: %s (check %s)", po.cfg.node_host, po.cfg.port,
			psl_strerror(rc),
			po.role == PSL_SCHEDULER ? "DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT"
						 : "DMLC_NODE_HOST, DMLC_INTERFACE and DMLC_PORT");
		return rc;
	}
	pthread_mutex_lock(&po.mu); /* (a scheduler's van may be registering nodes) */
	po.me.addr_len = bres.addr_len > PSL_VAN_ADDR_MAX ? PSL_VAN_ADDR_MAX : bres.addr_len;
	memcpy(po.me.addr, bres.addr, po.me.addr_len);
	po.me.first_port = bres.port;
	po.me.port = bres.port;
	if (po.role == PSL_SCHEDULER)
		po.peers[1].node = po.me;
	pthread_mutex_unlock(&po.mu);
	PSL_INFO("%s listening on %s:%d, van %s (%s)", psl__role_name(po.role), po.me.hostname,
		 po.me.port, po.lib.ops->name, po.lib.ops->version ? po.lib.ops->version : "");

	if (po.role != PSL_SCHEDULER) {
		struct psl__node sched;
		struct psl_van_peer p;
		memset(&sched, 0, sizeof(sched));
		sched.role = PSL_SCHEDULER;
		sched.id = 1;
		snprintf(sched.hostname, sizeof(sched.hostname), "%s", po.cfg.root_uri);
		sched.port = po.cfg.root_port;
		po.peers[1].node = sched;
		p = (struct psl_van_peer){.size = sizeof(p),
					  .id = 1,
					  .role = PSL_SCHEDULER,
					  .host = sched.hostname,
					  .port = sched.port};
		rc = po.lib.ops->connect(po.van, &p, PSL_EMPTY);
		if (!rc)
			rc = psl__control_register(psl__cur);
		if (rc) {
			int why;
			/* the van may say why (another van answered, a refused
			 * secret), just before or just after the send failed: that
			 * reason, not the send's error */
			why = van_reason_within(ABORT_GRACE_MS);
			if (why) {
				PSL_FAIL(0, PSL_LOG_ERROR, "%s", po.start_msg);
				return why;
			}
			PSL_FAIL(0, PSL_LOG_ERROR, "cannot contact the scheduler at %s:%d (DMLC_PS_ROOT_URI, "
				"DMLC_PS_ROOT_PORT): %s",
				po.cfg.root_uri, po.cfg.root_port, psl_strerror(rc));
			return rc;
		}
	}
	return 0;
}

/* The rest of the current node's start: every node registered, the node
 * list here. */
static int finish_start(void)
{
	int rc;

	if (po.role == PSL_SCHEDULER) {
		po.my_rank = 0;
		rc = wait_registrations();
	} else {
		rc = wait_node_list();
	}
	if (rc) {
		PSL_FAIL(0, PSL_LOG_ERROR, "%s", po.start_msg[0] ? po.start_msg : psl_strerror(rc));
		/* the nodes it reached wait for a node list or a release: they
		 * fail now, with this reason, instead of at PS_START_TIMEOUT */
		if (po.role == PSL_SCHEDULER)
			psl__control_abort_nodes(psl__cur, rc, po.start_msg[0] ? po.start_msg
								     : psl_strerror(rc));
		return rc;
	}
	rc = psl__timer_start(psl__cur);
	if (rc)
		return rc;
	if (po.role != PSL_SCHEDULER)
		psl__ipc_start(psl__cur);
	pthread_mutex_lock(&po.mu);
	po.state = PSL__READY;
	pthread_cond_broadcast(&po.cv);
	pthread_mutex_unlock(&po.mu);
	{
		char who[48];
		if (po.role == PSL_SCHEDULER)
			snprintf(who, sizeof(who), "scheduler");
		else if (po.cfg.group_size > 1) /* the group's rank, then the instance */
			snprintf(who, sizeof(who), "%s %d.%d", psl__role_name(po.role),
				 po.my_rank / po.cfg.group_size, po.cfg.instance);
		else
			snprintf(who, sizeof(who), "%s %d", psl__role_name(po.role), po.my_rank);
		psl__log_set_who(who);
	}
	PSL_DBG("ready: id %d, %d servers, %d workers", po.my_id, po.cfg.num_servers,
		po.cfg.num_workers);
	psl__heartbeat_say(psl__cur);
	return 0;
}

/* Starts node `slot` of this process up to its registration. */
static int start_slot(int slot, int joint_role, int instance, bool joint)
{
	psl__set_nodes(slot + 1, joint);
	psl__enter(&psl__offices[slot]);
	return start_node(joint_role, instance);
}

/* Starts this process's nodes: one, a joint process's server and worker, or
 * with group (psl_start_group) DMLC_GROUP_SIZE instances of its role (a
 * joint process's servers, then its workers). Every node registers before
 * any waits for the node list: the scheduler sends it once every node of the
 * job registered. */
static int start_offices(bool group)
{
	int rc, i, n = 1, g = 1, role;
	bool joint;

	psl__set_nodes(1, false);
	psl__env_reads_clear();
	rc = start_slot(0, PSL_SERVER, group ? 0 : -1, false);
	role = po.role;
	joint = !rc && po.cfg.joint;
	if (!rc && group && role != PSL_SCHEDULER)
		g = po.cfg.group_size;
	if (!rc)
		n = joint ? 2 * g : g;
	for (i = 1; i < n && !rc; i++)
		rc = start_slot(i, i < g ? role : PSL_WORKER, group ? i % g : -1, joint);
	n = psl__nodes_here();
	/* variables of ps-lite, BytePS, StepMesh that neither core nor van use
	 * (once every van read its own) */
	if (!rc)
		psl__env_compat_warn(po.role);
	for (i = 0; i < n && !rc; i++) {
		psl__enter(&psl__offices[i]);
		rc = finish_start();
	}
	if (rc) {
		for (i = n - 1; i >= 0; i--) {
			psl__enter(&psl__offices[i]);
			teardown();
		}
		psl__set_nodes(1, false);
	}
	psl__enter(&psl__offices[0]);
	return rc;
}

static int start(int customer_id, bool do_barrier, bool group)
{
	int rc;

	psl__clear_error();
	pthread_mutex_lock(&start_mu);
	if (psl__offices[0].state != PSL__READY) {
		rc = start_offices(group);
		if (rc) {
			pthread_mutex_unlock(&start_mu);
			return rc;
		}
	}
	pthread_mutex_unlock(&start_mu);
	if (psl_is_recovery() && do_barrier) {
		/* the others passed it long ago (ps-lite's nodes skip it by hand) */
		PSL_INFO("this node takes the place of a lost one (PS_RECOVERY): the start-up "
			 "barrier is skipped");
		return 0;
	}
	if (!do_barrier)
		return 0;
	rc = psl__barrier_here(customer_id, PSL_GROUP_ALL, PSL_CMD_INSTANCE_BARRIER);
	if (rc)
		PSL_ERR("the start-up barrier failed: %s", psl_strerror(rc));
	return rc;
}

int psl_start(int customer_id, bool do_barrier)
{
	return start(customer_id, do_barrier, false);
}

int psl_start_group(int customer_id, bool do_barrier)
{
	return start(customer_id, do_barrier, true);
}

int psl_finalize(int customer_id, bool do_barrier)
{
	int rc = 0, i, n = psl__nodes_here();
	struct psl__office *home = psl__cur;

	pthread_mutex_lock(&start_mu);
	if (psl__offices[0].state == PSL__STOPPED) {
		pthread_mutex_unlock(&start_mu);
		return 0;
	}
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&psl__offices[i].mu);
		psl__offices[i].leaving = true;
		pthread_mutex_unlock(&psl__offices[i].mu);
	}
	if (psl__offices[0].state == PSL__READY && do_barrier) {
		rc = psl__barrier_here(customer_id, PSL_GROUP_ALL, PSL_CMD_INSTANCE_BARRIER);
		if (rc)
			PSL_ERR("the final barrier failed: %s", psl_strerror(rc));
	}
	for (i = 0; i < n; i++) {
		psl__enter(&psl__offices[i]);
		if (po.state == PSL__READY)
			psl__customers_finalize(psl__cur);
	}
	for (i = n - 1; i >= 0; i--) {
		psl__enter(&psl__offices[i]);
		teardown();
	}
	psl__set_nodes(1, false);
	psl__enter(home);
	pthread_mutex_unlock(&start_mu);
	return rc;
}
