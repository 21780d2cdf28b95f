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
#include "cuda_after.h"
#include "customer.h"
#include "log.h"
#include "ipc.h"
#include "postoffice.h"
#include "resender.h"

static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;

static int wait_ms(struct psl__office *o, int64_t ms)
{
	return psl__cond_wait_ms(&o->cv, &o->mu, ms);
}

/* Scheduler: wait until every node registered and got the list. */
static int wait_registrations(struct psl__office *o)
{
	int64_t t0 = psl__now_ms(), next_log = t0 + 10000;
	int total = o->cfg.num_servers + o->cfg.num_workers, rc = 0;
	const char *xg = o->cfg.group_size > 1 ? " x DMLC_GROUP_SIZE" : "";

	pthread_mutex_lock(&o->mu);
	while (!o->got_node_list && !o->start_err) {
		int64_t now = psl__now_ms();
		if (o->list_sent && o->list_pending <= 0) {
			o->got_node_list = true; /* every node list went out */
			break;
		}
		if (o->list_sent && now - t0 > o->cfg.start_timeout_s * 1000LL) {
			snprintf(o->start_msg, sizeof(o->start_msg),
				 "%d of the node list's sends did not complete within %d s "
				 "(PS_START_TIMEOUT): the van did not say whether they went out",
				 o->list_pending, o->cfg.start_timeout_s);
			o->start_err = -ETIMEDOUT;
			break;
		}
		if (now - t0 > o->cfg.start_timeout_s * 1000LL || now >= next_log) {
			int i, ns = 0, nw = 0;
			for (i = 0; i < o->nreg; i++) {
				if (o->reg[i].role == PSL_SERVER)
					ns++;
				else
					nw++;
			}
			if (now - t0 > o->cfg.start_timeout_s * 1000LL) {
				snprintf(o->start_msg, sizeof(o->start_msg),
					 "only %d of %d servers (DMLC_NUM_SERVER%s) and %d of %d workers "
					 "(DMLC_NUM_WORKER%s) registered within %d s (PS_START_TIMEOUT): "
					 "start the missing nodes with DMLC_PS_ROOT_URI=%s "
					 "DMLC_PS_ROOT_PORT=%d%s, or raise PS_START_TIMEOUT%s%s",
					 ns, o->cfg.num_servers, xg, nw, o->cfg.num_workers, xg,
					 o->cfg.start_timeout_s, o->cfg.root_uri, o->cfg.root_port,
					 o->cfg.secret_len ? " and the same PS_JOB_SECRET" : "",
					 o->refused[0] ? "; refused: " : "", o->refused);
				o->start_err = -ETIMEDOUT;
				break;
			}
			PSL_INFO("waiting for nodes to register: %d of %d servers, %d of %d workers",
				 ns, o->cfg.num_servers, nw, o->cfg.num_workers);
			next_log = now + 10000;
		}
		wait_ms(o, 250);
	}
	rc = o->start_err;
	pthread_mutex_unlock(&o->mu);
	(void)total;
	return rc;
}

#define ABORT_GRACE_MS 1000

/* Server or worker: contacting the scheduler failed at once. The van's
 * reason for it may still be on its way from its thread: wait for it up to
 * grace_ms. Returns it (o->start_msg says it) or 0. */
static int van_reason_within(struct psl__office *o, int64_t grace_ms)
{
	int64_t end = psl__now_ms() + grace_ms;
	int why;

	pthread_mutex_lock(&o->mu);
	while (!o->start_err && psl__now_ms() < end)
		wait_ms(o, 20);
	why = o->start_err;
	pthread_mutex_unlock(&o->mu);
	return why;
}

/* Server or worker: reach the scheduler, register, wait for the list. */
static int wait_node_list(struct psl__office *o)
{
	int64_t t0 = psl__now_ms(), next_log = t0 + 10000;
	int rc = 0;

	pthread_mutex_lock(&o->mu);
	while (!o->got_node_list && !o->start_err) {
		int64_t now = psl__now_ms();
		/* a scheduler that gives up says why (PSL__ABORT_TAG) as it closes:
		 * its reason may arrive just after its connection dropped */
		if (o->peers[1].dead && now - o->peers[1].down_at_ms >= ABORT_GRACE_MS) {
			snprintf(o->start_msg, sizeof(o->start_msg),
				 "lost the connection to the scheduler at %s:%d while registering",
				 o->cfg.root_uri, o->cfg.root_port);
			o->start_err = -ECONNRESET;
			break;
		}
		if (o->reg_send_err && now - o->reg_send_at_ms >= ABORT_GRACE_MS) {
			snprintf(o->start_msg, sizeof(o->start_msg), "%s", o->reg_send_msg);
			o->start_err = o->reg_send_err;
			break;
		}
		if (!o->peers[1].up && now - t0 > o->cfg.connect_timeout_s * 1000LL) {
			snprintf(o->start_msg, sizeof(o->start_msg),
				 "cannot reach the scheduler at %s:%d (DMLC_PS_ROOT_URI, "
				 "DMLC_PS_ROOT_PORT) within %d s (PS_CONNECT_TIMEOUT): is it running, "
				 "and are the address and port right?",
				 o->cfg.root_uri, o->cfg.root_port, o->cfg.connect_timeout_s);
			o->start_err = -ETIMEDOUT;
			break;
		}
		if (now - t0 > o->cfg.start_timeout_s * 1000LL) {
			snprintf(o->start_msg, sizeof(o->start_msg),
				 "registered with the scheduler at %s:%d, but the node list did not "
				 "come within %d s (PS_START_TIMEOUT): are all %d servers and %d "
				 "workers started, with the same DMLC_NUM_SERVER and DMLC_NUM_WORKER%s?",
				 o->cfg.root_uri, o->cfg.root_port, o->cfg.start_timeout_s,
				 o->cfg.num_servers, o->cfg.num_workers,
				 o->cfg.secret_len ? " and the same PS_JOB_SECRET" : "");
			o->start_err = -ETIMEDOUT;
			break;
		}
		if (now >= next_log) {
			PSL_INFO("%s the scheduler at %s:%d ...",
				 o->peers[1].up ? "registered; waiting for the other nodes via"
						: "still trying to reach",
				 o->cfg.root_uri, o->cfg.root_port);
			next_log = now + 10000;
		}
		wait_ms(o, 200);
	}
	rc = o->start_err;
	pthread_mutex_unlock(&o->mu);
	return rc;
}

/* The start-up bookkeeping of o, as before a start (teardown holds mu;
 * start_node runs before the van can call in). */
static void clear_start_state(struct psl__office *o)
{
	o->got_node_list = false;
	o->list_sent = false;
	o->list_pending = 0;
	o->list_connected = 0;
	o->barrier_err = 0;
	o->barrier_msg[0] = 0;
	o->start_err = 0;
}

static void teardown(struct psl__office *o)
{
	int64_t t0;
	/* with PS_RESEND, what we sent last (the scheduler's releases of the
	 * final barrier) may still need a resend: wait for the ACKs, bounded */
	if (o->cfg.resend && o->state == PSL__READY && o->timer_running) {
		int64_t limit = 12LL * o->cfg.resend_timeout_ms, t = psl__now_ms();
		if (limit > 15000)
			limit = 15000;
		while (psl__resender_pending(o) > 0 && psl__now_ms() - t < limit) {
			struct timespec ts = {0, 20 * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	pthread_mutex_lock(&o->mu);
	o->state = PSL__FINALIZING;
	pthread_mutex_unlock(&o->mu);
	psl__timer_stop(o);
	t0 = psl__now_ms();
	psl__drive_stop(o);
	if (o->van)
		o->lib.ops->fini(o->van);
	PSL_DBG("van stopped in %lld ms", (long long)(psl__now_ms() - t0));
	o->van = NULL;
	psl__customers_node_lost(o, 0, -ESHUTDOWN);
	psl__customer_drop_held(o);
	if (o->cfg.resend)
		psl__resender_fini(o);
	psl__ipc_stop(o); /* (held messages pointed into peers' rings) */
	psl__van_close(&o->lib);
	psl__control_reset(o);
	pthread_mutex_lock(&o->mu);
	free(o->peers);
	o->peers = NULL;
	o->max_id = 0;
	o->state = PSL__STOPPED;
	o->my_id = -1;
	o->my_rank = -1;
	clear_start_state(o);
	o->start_msg[0] = 0;
	o->reg_send_err = 0;
	o->reg_send_msg[0] = 0;
	o->refused[0] = 0;
	o->leaving = false;
	o->final_released = false;
	atomic_store(&o->resend_live, false);
	pthread_mutex_unlock(&o->mu);
}

static const char *port_var(struct psl__office *o)
{
	return o->role == PSL_SCHEDULER ? "DMLC_PS_ROOT_PORT" : "DMLC_PORT";
}

/* Starts the current node up to its registration (a scheduler: up to
 * listening); finish_start waits for the job. joint_role: the node's role
 * in a DMLC_ROLE=joint process; instance: its index in the group this
 * process runs (psl_start_group), -1 if the process is one instance. */
/* What node o's log lines say before it has its rank: its role, and in a
 * process that runs a group its instance ("server instance 1"); once
 * registered, "server 0.1" (its group's rank, then its instance). */
static void set_who_early(struct psl__office *o, int instance)
{
	char who[48];
	if (instance < 0 || o->cfg.group_size <= 1 || o->role == PSL_SCHEDULER) {
		psl__log_set_who(o, psl__role_name(o->role));
		return;
	}
	snprintf(who, sizeof(who), "%s instance %d", psl__role_name(o->role), instance);
	psl__log_set_who(o, who);
}

static int start_node(struct psl__office *o, int joint_role, int instance)
{
	char err[1024], vc[96];
	unsigned van_errors;
	struct psl_van_bind_req breq;
	struct psl_van_bind_res bres;
	int rc, g;

	rc = psl__config_load_inst(&o->cfg, joint_role, instance, err, sizeof(err));
	if (rc) {
		PSL_FAIL(0, PSL_LOG_ERROR, "%s", err);
		return rc;
	}
	psl__log_init(o->cfg.verbose);
	o->role = o->cfg.role;
	set_who_early(o, instance);
	if (o->cfg.malloc_tune && psl__malloc_tune())
		PSL_DBG("PS_MALLOC_TUNE=1: malloc keeps freed memory for reuse (mmap "
			"threshold 32 MiB, trim threshold 64 MiB)");
	o->max_id = 7 + 2 * o->cfg.num_workers;
	if (6 + 2 * o->cfg.num_servers > o->max_id)
		o->max_id = 6 + 2 * o->cfg.num_servers;
	o->peers = calloc((size_t)o->max_id + 1, sizeof(*o->peers));
	if (!o->peers)
		return -ENOMEM;
	if (o->role == PSL_SCHEDULER) {
		int total = o->cfg.num_servers + o->cfg.num_workers;
		o->reg = calloc((size_t)total, sizeof(*o->reg));
		if (!o->reg)
			return -ENOMEM;
		for (g = 1; g <= 7; g++) {
			o->barrier_senders[g] = calloc(2 * ((size_t)o->max_id + 1), sizeof(bool));
			if (!o->barrier_senders[g])
				return -ENOMEM;
		}
	}

	rc = psl__van_open(o->cfg.van, &o->lib, err, sizeof(err));
	if (rc) {
		PSL_FAIL(0, PSL_LOG_ERROR, "%s: %s", psl__van_choice(&o->cfg, vc, sizeof(vc)), err);
		return rc;
	}
	psl__host_init(o, &o->host);
	van_errors = psl__van_errors();
	if (o->cfg.group_size > 1 && o->role != PSL_SCHEDULER) {
		/* read by config_load for the instance's rank: no compatibility WARN */
		psl__env_note_read("DMLC_NODE_RANK");
		psl__env_note_read("STEPMESH_GPU");
		psl__env_note_read("DMLC_RANK_OFFSET");
	}
	atomic_store(&o->drive_off, false);
	rc = o->lib.ops->init(&o->host, &o->van);
	if (rc) {
		o->van = NULL;
		if (rc != -ENODEV && psl__van_errors() != van_errors) {
			/* the van said why, naming the setting: one ERROR line is enough */
			PSL_INFO("%s: the van did not start (%s): see the van's message above",
				 psl__van_choice(&o->cfg, vc, sizeof(vc)), psl_strerror(rc));
			psl__set_error("%s", psl__van_last_error(err, sizeof(err)));
		} else if (rc == -ENODEV) {
			PSL_INFO("van '%s' (%s) found no device it can use on this machine",
				 o->cfg.van, o->lib.path);
			PSL_FAIL(0, PSL_LOG_ERROR, "%s: the '%s' van cannot run here (no device): choose another "
				"van with DMLC_ENABLE_RDMA (pslite-info lists them)",
				psl__van_choice(&o->cfg, vc, sizeof(vc)), o->cfg.van);
		} else {
			PSL_FAIL(0, PSL_LOG_ERROR, "%s: the van failed to start: %s",
				psl__van_choice(&o->cfg, vc, sizeof(vc)), psl_strerror(rc));
		}
		return rc;
	}
	memset(&o->caps, 0, sizeof(o->caps));
	o->caps.size = sizeof(o->caps);
	o->lib.ops->query(o->van, &o->caps);
	if (o->cfg.resend && (rc = psl__resender_init(o, o->cfg.resend_timeout_ms, o->cfg.recovery)))
		return rc;

	memset(&o->me, 0, sizeof(o->me));
	o->me.role = o->role;
	o->me.id = o->role == PSL_SCHEDULER ? 1 : PSL_EMPTY;
	snprintf(o->me.hostname, sizeof(o->me.hostname), "%s", o->cfg.node_host);
	o->me.aux_id = o->cfg.preferred_rank;
	o->me.customer_id = 0;
	o->my_id = o->me.id;
	clear_start_state(o);
	o->recovered = false;
	o->job_lost_err = 0;
	o->job_lost_msg[0] = 0;
	atomic_store(&o->van_ts, 0);
	o->state = PSL__STARTING;

	breq = (struct psl_van_bind_req){
		.size = sizeof(breq),
		.role = o->role,
		.host = o->cfg.node_host,
		.port = o->cfg.port,
	};
	memset(&bres, 0, sizeof(bres));
	if (o->role == PSL_SCHEDULER) {
		o->peers[1].node = o->me;
		o->peers[1].known = true;
		o->peers[1].up = true;
	}
	rc = o->lib.ops->bind(o->van, &breq, &bres);
	if (rc == -EADDRINUSE) {
		PSL_FAIL(0, PSL_LOG_ERROR, "%s=%d: port %d on %s is already in use: choose a free port%s", port_var(o),
			o->cfg.port, o->cfg.port, o->cfg.node_host,
			o->role == PSL_SCHEDULER ? "" : ", or leave DMLC_PORT unset");
		return rc;
	} else if (rc) {
		PSL_FAIL(0, PSL_LOG_ERROR, "cannot listen on %s:%d: %s (check %s)", o->cfg.node_host, o->cfg.port,
			psl_strerror(rc),
			o->role == PSL_SCHEDULER ? "DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT"
						 : "DMLC_NODE_HOST, DMLC_INTERFACE and DMLC_PORT");
		return rc;
	}
	pthread_mutex_lock(&o->mu); /* (a scheduler's van may be registering nodes) */
	o->me.addr_len = bres.addr_len > PSL_VAN_ADDR_MAX ? PSL_VAN_ADDR_MAX : bres.addr_len;
	memcpy(o->me.addr, bres.addr, o->me.addr_len);
	o->me.first_port = bres.port;
	o->me.port = bres.port;
	if (o->role == PSL_SCHEDULER)
		o->peers[1].node = o->me;
	pthread_mutex_unlock(&o->mu);
	PSL_INFO("%s listening on %s:%d, van %s (%s)", psl__role_name(o->role), o->me.hostname,
		 o->me.port, o->lib.ops->name, o->lib.ops->version ? o->lib.ops->version : "");

	if (o->role != PSL_SCHEDULER) {
		struct psl__node sched;
		struct psl_van_peer p;
		memset(&sched, 0, sizeof(sched));
		sched.role = PSL_SCHEDULER;
		sched.id = 1;
		snprintf(sched.hostname, sizeof(sched.hostname), "%s", o->cfg.root_uri);
		sched.port = o->cfg.root_port;
		o->peers[1].node = sched;
		p = (struct psl_van_peer){.size = sizeof(p),
					  .id = 1,
					  .role = PSL_SCHEDULER,
					  .host = sched.hostname,
					  .port = sched.port};
		rc = o->lib.ops->connect(o->van, &p, PSL_EMPTY);
		if (!rc)
			rc = psl__control_register(o);
		if (rc) {
			int why;
			/* the van may say why (another van answered, a refused
			 * secret), just before or just after the send failed: that
			 * reason, not the send's error */
			why = van_reason_within(o, ABORT_GRACE_MS);
			if (why) {
				PSL_FAIL(0, PSL_LOG_ERROR, "%s", o->start_msg);
				return why;
			}
			PSL_FAIL(0, PSL_LOG_ERROR, "cannot contact the scheduler at %s:%d (DMLC_PS_ROOT_URI, "
				"DMLC_PS_ROOT_PORT): %s",
				o->cfg.root_uri, o->cfg.root_port, psl_strerror(rc));
			return rc;
		}
	}
	return 0;
}

/* The rest of the current node's start: every node registered, the node
 * list here. */
static int finish_start(struct psl__office *o)
{
	int rc;

	if (o->role == PSL_SCHEDULER) {
		o->my_rank = 0;
		rc = wait_registrations(o);
	} else {
		rc = wait_node_list(o);
	}
	if (rc) {
		PSL_FAIL(0, PSL_LOG_ERROR, "%s", o->start_msg[0] ? o->start_msg : psl_strerror(rc));
		/* the nodes it reached wait for a node list or a release: they
		 * fail now, with this reason, instead of at PS_START_TIMEOUT */
		if (o->role == PSL_SCHEDULER)
			psl__control_abort_nodes(o, rc, o->start_msg[0] ? o->start_msg
								     : psl_strerror(rc));
		return rc;
	}
	rc = psl__timer_start(o);
	if (rc)
		return rc;
	if (o->role != PSL_SCHEDULER)
		psl__ipc_start(o);
	pthread_mutex_lock(&o->mu);
	o->state = PSL__READY;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
	{
		char who[48];
		if (o->role == PSL_SCHEDULER)
			snprintf(who, sizeof(who), "scheduler");
		else if (o->cfg.group_size > 1) /* the group's rank, then the instance */
			snprintf(who, sizeof(who), "%s %d.%d", psl__role_name(o->role),
				 o->my_rank / o->cfg.group_size, o->cfg.instance);
		else
			snprintf(who, sizeof(who), "%s %d", psl__role_name(o->role), o->my_rank);
		psl__log_set_who(o, who);
	}
	PSL_DBG("ready: id %d, %d servers, %d workers", o->my_id, o->cfg.num_servers,
		o->cfg.num_workers);
	psl__heartbeat_say(o);
	return 0;
}

/* Starts node `slot` of this process up to its registration. */
static int start_slot(int slot, int joint_role, int instance, bool joint)
{
	struct psl__office *o = &psl__offices[slot];
	psl__set_nodes(slot + 1, joint);
	psl__enter(o); /* (its log lines name it) */
	return start_node(o, joint_role, instance);
}

/* Starts this process's nodes: one, a joint process's server and worker, or
 * with group (psl_start_group) DMLC_GROUP_SIZE instances of its role (a
 * joint process's servers, then its workers). Every node registers before
 * any waits for the node list: the scheduler sends it once every node of the
 * job registered. */
static int start_offices(bool group)
{
	struct psl__office *first = &psl__offices[0];
	int rc, i, n = 1, g = 1, role;
	bool joint;

	psl__set_nodes(1, false);
	psl__env_reads_clear();
	rc = start_slot(0, PSL_SERVER, group ? 0 : -1, false);
	role = first->role;
	joint = !rc && first->cfg.joint;
	if (!rc && group && role != PSL_SCHEDULER)
		g = first->cfg.group_size;
	if (!rc)
		n = joint ? 2 * g : g;
	for (i = 1; i < n && !rc; i++)
		rc = start_slot(i, i < g ? role : PSL_WORKER, group ? i % g : -1, joint);
	n = psl__nodes_here();
	/* variables of ps-lite, BytePS, StepMesh that neither core nor van use
	 * (once every van read its own) */
	if (!rc)
		psl__env_compat_warn(psl__offices[n - 1].role); /* (the last started) */
	for (i = 0; i < n && !rc; i++) {
		psl__enter(&psl__offices[i]); /* (its log lines name it) */
		rc = finish_start(&psl__offices[i]);
	}
	if (rc) {
		for (i = n - 1; i >= 0; i--) {
			psl__enter(&psl__offices[i]);
			teardown(&psl__offices[i]);
		}
		psl__set_nodes(1, false);
	}
	psl__enter(first);
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
	struct psl__office *home = psl__cur, *o;

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
		o = &psl__offices[i];
		psl__enter(o); /* (its log lines, its customers' last callbacks) */
		if (o->state == PSL__READY)
			psl__customers_finalize(o);
	}
	/* the sends still waiting for a GPU (z-form pushes and responses,
	 * those of the finalize callbacks too) go before the vans stop */
	psl__cuda_after_idle();
	for (i = n - 1; i >= 0; i--) {
		o = &psl__offices[i];
		psl__enter(o);
		teardown(o);
	}
	psl__set_nodes(1, false);
	psl__enter(home);
	pthread_mutex_unlock(&start_mu);
	return rc;
}
