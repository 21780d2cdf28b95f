/*
 * Unit tests for the scheduler's side of the control plane (core/control.c)
 * over the fake van: registrations are fed in as ADD_NODE messages, and the
 * ids it assigns (docs/wire.md 6.2: host names descending, ports ascending, or
 * DMLC_RANK), the node list it sends (to workers then servers, itself last),
 * and how it counts and releases barriers (docs/wire.md section 7) are checked.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control.h"
#include "control_int.h"
#include "message.h"
#include "postoffice.h"
#include "pslite.h"
#include "van_host.h"
#include "testutil.h"
#include "fakevan.h"

/* A scheduler of S servers and W workers, registering. */
static void scheduler_up(int S, int W)
{
	int g;
	node_up_as(PSL_SCHEDULER, 1, S, W);
	memset(psl__po.peers, 0, sizeof(*psl__po.peers) * ((size_t)psl__po.max_id + 1));
	psl__po.state = PSL__STARTING;
	psl__po.got_node_list = false;
	psl__po.list_sent = false;
	psl__po.list_pending = psl__po.list_connected = 0;
	psl__po.start_err = 0;
	psl__po.start_msg[0] = 0;
	psl__po.cfg.ordered_hosts[0] = 0;
	psl__po.cfg.mixed_mode = false;
	memset(&psl__po.me, 0, sizeof(psl__po.me));
	psl__po.me.role = PSL_SCHEDULER;
	psl__po.me.id = 1;
	snprintf(psl__po.me.hostname, sizeof(psl__po.me.hostname), "10.0.0.1");
	psl__po.me.port = 9000;
	psl__po.peers[1].node = psl__po.me;
	psl__po.peers[1].known = true;
	psl__po.reg = calloc((size_t)(S + W), sizeof(*psl__po.reg));
	psl__po.nreg = 0;
	for (g = 1; g <= 7; g++)
		psl__po.barrier_senders[g] = calloc(2 * ((size_t)psl__po.max_id + 1), sizeof(bool));
	atomic_store(&psl__po.van_ts, 0);
}

static int scheduler_down(void **state)
{
	psl__control_reset(psl__cur);
	psl__po.got_node_list = false;
	psl__po.start_err = 0;
	return node_down(state);
}

/* A cmd message from node id "from" whose one entry is host:port, role, aux;
 * body: a pslite registration's (NULL: none, as a C++ node's). */
static void node_msg_body(int cmd, int from, const char *host, int port, int role, int aux,
			  const char *body)
{
	struct psl__node n;
	struct psl__meta m;
	uint8_t buf[1024];
	size_t len;
	memset(&n, 0, sizeof(n));
	n.role = role;
	n.id = from;
	snprintf(n.hostname, sizeof(n.hostname), "%s", host);
	n.port = port;
	n.aux_id = aux;
	psl__meta_init(&m);
	m.cmd = cmd;
	m.nodes = &n;
	m.node_size = 1;
	m.timestamp = 0;
	m.body = body;
	m.body_size = body ? (int)strlen(body) : 0;
	len = psl__meta_encode(&m, buf);
	deliver_raw(from, buf, len, 0, NULL, NULL);
}

static void node_msg(int cmd, int from, const char *host, int port, int role, int aux)
{
	node_msg_body(cmd, from, host, port, role, aux, NULL);
}

static void reg(const char *host, int port, int role, int aux)
{
	node_msg(PSL_CMD_ADD_NODE, PSL_EMPTY, host, port, role, aux);
}

/* A pslite node's registration (reg: a C++ node's). */
#define PSL_BODY "pslite-counts 2 1 1|pslite-heartbeat 1"
static void reg_pslite(const char *host, int port, int role, int aux)
{
	node_msg_body(PSL_CMD_ADD_NODE, PSL_EMPTY, host, port, role, aux, PSL_BODY);
}

static const struct psl__node *in_list(const struct sent *s, const char *host, int port)
{
	int i;
	for (i = 0; i < s->m.node_size; i++)
		if (!strcmp(s->m.nodes[i].hostname, host) && s->m.nodes[i].port == port)
			return &s->m.nodes[i];
	return NULL;
}

static void test_ids_and_node_list(void **state)
{
	const struct sent *s;
	int i;
	static const int order[4] = {9, 11, 8, 10};
	(void)state;

	scheduler_up(2, 2);
	/* "10.0.0.9" sorts before "10.0.0.10" (bytes, descending) */
	reg("10.0.0.10", 5000, PSL_WORKER, -1);
	reg("10.0.0.9", 4001, PSL_SERVER, -1);
	reg("10.0.0.10", 4000, PSL_SERVER, -1);
	assert_int_equal(g_nsent, 0); /* nothing before the last registration */
	reg("10.0.0.9", 5000, PSL_WORKER, -1);
	/* every send of the list completed: the start's wait may end */
	assert_true(psl__po.list_sent);
	assert_int_equal(psl__po.list_pending, 0);
	assert_int_equal(psl__po.list_connected, 4);
	assert_int_equal(psl__po.start_err, 0);
	assert_int_equal(g_nsent, 4);
	for (i = 0; i < 4; i++) {
		const struct psl__node *n;
		s = &g_sent[i];
		assert_int_equal(s->to, order[i]); /* workers, then servers, ascending */
		assert_int_equal(s->m.cmd, PSL_CMD_ADD_NODE);
		assert_false(s->m.request);
		assert_int_equal(s->m.timestamp, i); /* the Van timestamp, per message */
		assert_int_equal(s->m.node_size, 5);
		n = &s->m.nodes[4]; /* the scheduler comes last */
		assert_int_equal(n->role, PSL_SCHEDULER);
		assert_int_equal(n->id, 1);
		assert_string_equal(n->hostname, "10.0.0.1");
		assert_int_equal(n->port, 9000);
		assert_int_equal(in_list(s, "10.0.0.9", 5000)->id, 9);
		assert_int_equal(in_list(s, "10.0.0.10", 5000)->id, 11);
		assert_int_equal(in_list(s, "10.0.0.9", 4001)->id, 8);
		assert_int_equal(in_list(s, "10.0.0.10", 4000)->id, 10);
	}
	assert_true(psl__po.peers[9].known && psl__po.peers[11].known);
	assert_true(psl__po.peers[8].known && psl__po.peers[10].known);
	assert_string_equal(psl__po.peers[11].node.hostname, "10.0.0.10");
}

static void test_ids_same_host_by_port(void **state)
{
	const struct sent *s;
	(void)state;
	scheduler_up(1, 3);
	reg("127.0.0.1", 7002, PSL_WORKER, -1);
	reg("127.0.0.1", 7000, PSL_WORKER, -1);
	reg("127.0.0.1", 6000, PSL_SERVER, -1);
	reg("127.0.0.1", 7001, PSL_WORKER, -1);
	assert_int_equal(g_nsent, 4);
	s = &g_sent[0];
	assert_int_equal(in_list(s, "127.0.0.1", 7000)->id, 9);
	assert_int_equal(in_list(s, "127.0.0.1", 7001)->id, 11);
	assert_int_equal(in_list(s, "127.0.0.1", 7002)->id, 13);
	assert_int_equal(in_list(s, "127.0.0.1", 6000)->id, 8);
}

static void test_ids_by_rank(void **state)
{
	const struct sent *s;
	(void)state;
	scheduler_up(2, 2);
	reg("a", 1, PSL_WORKER, 1);
	reg("b", 1, PSL_WORKER, 0);
	reg("c", 1, PSL_SERVER, 1);
	reg("d", 1, PSL_SERVER, 0);
	assert_int_equal(g_nsent, 4);
	s = &g_sent[0];
	assert_int_equal(in_list(s, "a", 1)->id, 11);
	assert_int_equal(in_list(s, "b", 1)->id, 9);
	assert_int_equal(in_list(s, "c", 1)->id, 10);
	assert_int_equal(in_list(s, "d", 1)->id, 8);
}

/* A send of the scheduler's refusal: TERMINATE to an id no node has, the
 * body "pslite-refused: " and the reason (copied out NUL-terminated). */
static const char *refusal(int i)
{
	static char body[512];
	const struct sent *s = &g_sent[i];
	int n = s->m.body_size < (int)sizeof(body) - 1 ? s->m.body_size : (int)sizeof(body) - 1;
	assert_int_equal(s->m.cmd, PSL_CMD_TERMINATE);
	assert_true(s->to >= 30000);
	memcpy(body, s->m.body, (size_t)n);
	body[n] = 0;
	assert_contains(body, "pslite-refused: ");
	return body;
}

/* DMLC_RANK taken, out of range or set on some nodes only: that
 * registration is refused and told why; the job's start goes on (one
 * registration, maybe a stranger's, must not end it). */
static void test_ranks_clash(void **state)
{
	struct capture c;
	char *log;
	(void)state;
	scheduler_up(1, 2);
	capture_start(&c);
	reg("a", 1, PSL_WORKER, 0);
	reg("b", 1, PSL_WORKER, 0); /* the same DMLC_RANK twice */
	reg("c", 1, PSL_SERVER, 0);
	reg("d", 1, PSL_WORKER, 7);  /* out of range */
	reg("e", 1, PSL_WORKER, -1); /* none, while the others have one */
	log = capture_end(&c);
	assert_contains(log, "ignored a registration from the worker at b:1 with DMLC_RANK=0");
	free(log);
	assert_int_equal(psl__po.start_err, 0);
	assert_int_equal(psl__po.nreg, 2);
	assert_int_equal(g_nsent, 3);
	assert_contains(refusal(0), "DMLC_RANK=0: another node of this role registered with "
				    "the same DMLC_RANK");
	assert_contains(refusal(1), "DMLC_RANK=7, expected 0 to 1");
	assert_contains(refusal(2), "some nodes set DMLC_RANK and others do not");
	assert_contains(psl__po.refused, "the worker at e:1");
	reg("f", 1, PSL_WORKER, 1); /* the job is complete: the list goes out */
	assert_int_equal(g_nsent, 3 + 3);
	assert_int_equal(g_sent[3].m.cmd, PSL_CMD_ADD_NODE);
}

static void test_registrations_refused(void **state)
{
	struct capture c;
	char *log;
	(void)state;
	scheduler_up(1, 1);
	capture_start(&c);
	reg("h", 10, PSL_WORKER, -1);
	reg("h", 10, PSL_SERVER, -1);	 /* the same host:port again */
	reg("h", 11, PSL_WORKER, -1);	 /* a second worker of one */
	reg("", 12, PSL_SERVER, -1);	 /* no host */
	reg("h", 0, PSL_SERVER, -1);	 /* no port */
	reg("h", 13, PSL_SCHEDULER, -1); /* not a role that registers */
	log = capture_end(&c);
	assert_int_equal(psl__po.nreg, 1);
	assert_int_equal(g_nsent, 1); /* the second worker is told why */
	assert_contains(refusal(0), "1 workers are registered already and DMLC_NUM_WORKER=1");
	assert_contains(log, "ignored a second registration from h:10");
	assert_contains(log, "1 workers are registered already and DMLC_NUM_WORKER=1");
	assert_int_equal(count_lines_with(log, "ignored a malformed registration"), 3);
	free(log);
	reg("h", 14, PSL_SERVER, -1);
	assert_int_equal(g_nsent, 1 + 2);
	/* and after the list went out, nobody else gets in (and is told so) */
	capture_start(&c);
	reg("h", 15, PSL_WORKER, -1);
	log = capture_end(&c);
	assert_contains(log, "this job already has its 1 servers and 1 workers");
	free(log);
	assert_int_equal(g_nsent, 1 + 2 + 1);
	assert_contains(refusal(3), "the job already has its 1 servers and 1 workers");
}

/* ------------------------------------------------------------- barriers -- */

static void ready_2x2(void)
{
	scheduler_up(2, 2);
	reg("h", 1, PSL_WORKER, -1);
	reg("h", 2, PSL_WORKER, -1);
	reg("h", 3, PSL_SERVER, -1);
	reg("h", 4, PSL_SERVER, -1);
	psl__po.state = PSL__READY;
	clear_sent();
}

static void arrive(int from, int cmd, int group, int customer_id)
{
	struct psl__meta m;
	uint8_t buf[256];
	size_t len;
	psl__meta_init(&m);
	m.cmd = cmd;
	m.barrier_group = group;
	m.request = true;
	m.app_id = 0;
	m.customer_id = customer_id;
	len = psl__meta_encode(&m, buf);
	deliver_raw(from, buf, len, 0, NULL, NULL);
}

static void test_instance_barrier(void **state)
{
	static const int want[4] = {9, 11, 8, 10};
	int i;
	(void)state;
	ready_2x2();
	arrive(11, PSL_CMD_INSTANCE_BARRIER, 7, 0);
	arrive(8, PSL_CMD_INSTANCE_BARRIER, 7, 0);
	arrive(8, PSL_CMD_INSTANCE_BARRIER, 7, 0); /* counted once */
	arrive(9, PSL_CMD_INSTANCE_BARRIER, 7, 0);
	arrive(10, PSL_CMD_INSTANCE_BARRIER, 7, 0);
	assert_int_equal(g_nsent, 0); /* the scheduler is a member too */
	/* the scheduler arrives last: everyone is released, itself included */
	{
		unsigned gen;
		assert_int_equal(
			psl__control_barrier_arrive(psl__cur, 0, PSL_GROUP_ALL, PSL_CMD_INSTANCE_BARRIER, &gen), 0);
		assert_int_equal(psl__control_barrier_wait(psl__cur, PSL_GROUP_ALL, gen), 0);
	}
	assert_int_equal(g_nsent, 4);
	for (i = 0; i < 4; i++) {
		const struct sent *s = &g_sent[i];
		assert_int_equal(s->to, want[i]);
		assert_int_equal(s->m.cmd, PSL_CMD_INSTANCE_BARRIER);
		assert_false(s->m.request);
		assert_int_equal(s->m.app_id, 0);
		assert_int_equal(s->m.barrier_group, 7);
	}
	/* and it starts over */
	clear_sent();
	arrive(9, PSL_CMD_INSTANCE_BARRIER, 7, 0);
	assert_int_equal(g_nsent, 0);
}

static void test_group_barriers(void **state)
{
	struct capture c;
	char *log;
	(void)state;
	ready_2x2();
	/* workers only: the scheduler is not waited for */
	arrive(9, PSL_CMD_BARRIER, PSL_GROUP_WORKERS, 3);
	assert_int_equal(g_nsent, 0);
	arrive(11, PSL_CMD_BARRIER, PSL_GROUP_WORKERS, 3);
	assert_int_equal(g_nsent, 2);
	assert_int_equal(g_sent[0].to, 9);
	assert_int_equal(g_sent[1].to, 11);
	assert_int_equal(g_sent[1].m.cmd, PSL_CMD_BARRIER);
	assert_int_equal(g_sent[1].m.customer_id, 3);
	/* barriers of different groups and kinds are counted apart */
	clear_sent();
	arrive(8, PSL_CMD_BARRIER, PSL_GROUP_SERVERS, 0);
	arrive(9, PSL_CMD_INSTANCE_BARRIER, PSL_GROUP_SERVERS | PSL_GROUP_WORKERS, 0);
	arrive(10, PSL_CMD_INSTANCE_BARRIER, PSL_GROUP_SERVERS, 0);
	assert_int_equal(g_nsent, 0);
	arrive(10, PSL_CMD_BARRIER, PSL_GROUP_SERVERS, 0);
	assert_int_equal(g_nsent, 2);
	/* who is no member of a group is not counted */
	clear_sent();
	capture_start(&c);
	arrive(9, PSL_CMD_BARRIER, PSL_GROUP_SERVERS, 0);
	arrive(13, PSL_CMD_BARRIER, PSL_GROUP_WORKERS, 0); /* no worker 2 in this job */
	arrive(9, PSL_CMD_BARRIER, 0, 0);
	arrive(9, PSL_CMD_BARRIER, 8, 0);
	arrive(PSL_EMPTY, PSL_CMD_BARRIER, PSL_GROUP_WORKERS, 0);
	log = capture_end(&c);
	assert_int_equal(count_lines_with(log, "not a member of that group"), 3);
	/* ids the scheduler did not assign, and peers without one, are no
	 * node of the job: dropped before the barrier sees them */
	assert_int_equal(count_lines_with(log, "from node 13: not a node of this job"), 1);
	assert_int_equal(count_lines_with(log, "a peer without an id may only register"), 1);
	free(log);
	assert_int_equal(g_nsent, 0);
	arrive(9, PSL_CMD_BARRIER, PSL_GROUP_WORKERS, 0);
	assert_int_equal(g_nsent, 0); /* still waiting for worker 1 */
}

/* Instance groups (DMLC_GROUP_SIZE=2): a process that holds its whole
 * group asks once (a group-level BARRIER, from any of its instances, as C++
 * ps-lite and psl_start_group do), processes of one instance ask each (an
 * INSTANCE_BARRIER): the scheduler counts both as one barrier and answers
 * each asker with the kind it asked. */
static void test_grouped_barrier_kinds(void **state)
{
	int i;
	(void)state;
	ready_2x2();
	psl__po.cfg.group_size = 2; /* workers 9, 11 one group; servers 8, 10 */
	arrive(11, PSL_CMD_BARRIER, PSL_GROUP_WORKERS | PSL_GROUP_SERVERS, 0);
	arrive(8, PSL_CMD_INSTANCE_BARRIER, PSL_GROUP_WORKERS | PSL_GROUP_SERVERS, 0);
	assert_int_equal(g_nsent, 0); /* server 10 is missing */
	arrive(10, PSL_CMD_INSTANCE_BARRIER, PSL_GROUP_WORKERS | PSL_GROUP_SERVERS, 0);
	assert_int_equal(g_nsent, 3);
	for (i = 0; i < 3; i++)
		assert_int_equal(g_sent[i].m.cmd, g_sent[i].to == 11 ? PSL_CMD_BARRIER
								    : PSL_CMD_INSTANCE_BARRIER);
	assert_int_equal(g_sent[0].to + g_sent[1].to + g_sent[2].to, 11 + 8 + 10);
	/* C++ ps-lite's way on both sides: one BARRIER per group */
	clear_sent();
	arrive(9, PSL_CMD_BARRIER, PSL_GROUP_WORKERS | PSL_GROUP_SERVERS, 0);
	assert_int_equal(g_nsent, 0);
	arrive(10, PSL_CMD_BARRIER, PSL_GROUP_WORKERS | PSL_GROUP_SERVERS, 0);
	assert_int_equal(g_nsent, 2);
	psl__po.cfg.group_size = 1;
}

/* A node lost while others wait in a barrier does not hold them up. */
static void test_barrier_node_lost(void **state)
{
	struct capture c;
	char *log;
	(void)state;
	ready_2x2();
	arrive(9, PSL_CMD_BARRIER, PSL_GROUP_WORKERS, 0);
	assert_int_equal(g_nsent, 0);
	capture_start(&c);
	psl__node_lost(psl__cur, 11, -ECONNRESET, "test");
	log = capture_end(&c);
	assert_contains(log, "lost worker 1 (id 11");
	free(log);
	{
		/* worker 0 is released; the others are told (a HEARTBEAT listing
		 * the scheduler, then the lost node) */
		int i, released = 0, told = 0;
		for (i = 0; i < g_nsent; i++) {
			const struct sent *s = &g_sent[i];
			assert_true(s->to != 11);
			if (s->m.cmd == PSL_CMD_BARRIER) {
				assert_int_equal(s->to, 9);
				assert_false(s->m.request);
				released++;
			} else if (s->m.cmd == PSL_CMD_HEARTBEAT) {
				assert_int_equal(s->m.node_size, 2);
				assert_int_equal(s->m.nodes[0].id, 1);
				assert_int_equal(s->m.nodes[1].id, 11);
				told++;
			} else {
				fail_msg("unexpected %s to node %d", psl__cmd_name(s->m.cmd), s->to);
			}
		}
		assert_int_equal(released, 1);
		assert_int_equal(told, 3); /* workers 0, servers 0 and 1 */
	}
	/* later barriers do not wait for it either */
	clear_sent();
	arrive(9, PSL_CMD_BARRIER, PSL_GROUP_WORKERS, 0);
	assert_int_equal(g_nsent, 1);
	assert_int_equal(g_sent[0].m.cmd, PSL_CMD_BARRIER);
}

/* ------------------------------------------------------- the node side -- */

/* Worker 127.0.0.1:5001 of a 2x2 job, waiting for the node list. */
static void worker_starting(void)
{
	node_up_as(PSL_WORKER, PSL_EMPTY, 2, 2);
	memset(psl__po.peers, 0, sizeof(*psl__po.peers) * ((size_t)psl__po.max_id + 1));
	psl__po.state = PSL__STARTING;
	psl__po.got_node_list = false;
	psl__po.start_err = 0;
	psl__po.start_msg[0] = 0;
	psl__po.barrier_err = 0;
	memset(&psl__po.me, 0, sizeof(psl__po.me));
	psl__po.me.role = PSL_WORKER;
	psl__po.me.id = PSL_EMPTY;
	snprintf(psl__po.me.hostname, sizeof(psl__po.me.hostname), "127.0.0.1");
	psl__po.me.port = 5001;
}

static struct psl__node g_list[8];
static int g_nlist;

static void list_add(int role, int id, const char *host, int port)
{
	struct psl__node *n = &g_list[g_nlist++];
	memset(n, 0, sizeof(*n));
	n->role = role;
	n->id = id;
	snprintf(n->hostname, sizeof(n->hostname), "%s", host);
	n->port = port;
	n->aux_id = -1;
}

static void good_list(void)
{
	g_nlist = 0;
	list_add(PSL_WORKER, 9, "127.0.0.1", 5000);
	list_add(PSL_WORKER, 11, "127.0.0.1", 5001); /* this node */
	list_add(PSL_SERVER, 8, "127.0.0.1", 6000);
	list_add(PSL_SERVER, 10, "127.0.0.1", 6001);
	list_add(PSL_SCHEDULER, 1, "127.0.0.1", 9000);
}

static void send_list(int from)
{
	struct psl__meta m;
	uint8_t buf[8192];
	size_t len;
	psl__meta_init(&m);
	m.cmd = PSL_CMD_ADD_NODE;
	m.nodes = g_list;
	m.node_size = g_nlist;
	len = psl__meta_encode(&m, buf);
	deliver_raw(from, buf, len, 0, NULL, NULL);
}

static void test_node_takes_list(void **state)
{
	int i;
	bool to_sched = false, to_8 = false, to_10 = false;
	(void)state;
	worker_starting();
	good_list();
	send_list(1);
	assert_int_equal(psl__po.start_err, 0);
	assert_true(psl__po.got_node_list);
	assert_int_equal(psl__po.my_id, 11);
	assert_int_equal(psl__po.my_rank, 1);
	assert_true(psl__po.peers[8].known && psl__po.peers[10].known && psl__po.peers[9].known);
	/* connects to the servers and (again, now as ps11) the scheduler, not to
	 * the other worker */
	assert_int_equal(g_nconn, 3);
	for (i = 0; i < g_nconn; i++) {
		assert_int_equal(g_conn_as[i], 11);
		to_sched |= g_conn_to[i] == 1;
		to_8 |= g_conn_to[i] == 8;
		to_10 |= g_conn_to[i] == 10;
		assert_true(g_conn_to[i] != 9);
	}
	assert_true(to_sched && to_8 && to_10);
	/* the same list again changes nothing: no loss, no connection */
	psl__po.state = PSL__READY;
	{
		struct capture c;
		char *log;
		capture_start(&c);
		send_list(1);
		log = capture_end(&c);
		assert_null(strstr(log, "lost"));
		free(log);
		assert_int_equal(g_nconn, 3);
	}
	/* ps-lite's news of a recovered node (recovery.c): server 8 at a new
	 * address, alone in the list; the node reconnects to it as ps11 */
	{
		struct capture c;
		char *log;
		g_nlist = 0;
		list_add(PSL_SERVER, 8, "127.0.0.1", 6100);
		g_list[0].is_recovery = true;
		capture_start(&c);
		send_list(1);
		log = capture_end(&c);
		assert_contains(log, "is back");
		free(log);
		assert_int_equal(g_nconn, 4);
		assert_int_equal(g_conn_to[3], 8);
		assert_int_equal(g_conn_as[3], 11);
		assert_int_equal(psl__po.peers[8].node.port, 6100);
		assert_false(psl__po.peers[8].dead);
	}
}

/* Lists a node must refuse: each fails the start with a reason. */
static void expect_list_refused(const char *why)
{
	struct capture c;
	char *log;
	capture_start(&c);
	send_list(1);
	log = capture_end(&c);
	free(log);
	assert_false(psl__po.got_node_list);
	assert_int_equal(psl__po.start_err, -EPROTO);
	assert_contains(psl__po.start_msg, why);
	assert_int_equal(g_nconn, 0);
}

static void test_node_refuses_lists(void **state)
{
	struct capture c;
	char *log;
	(void)state;

	worker_starting();
	good_list();
	capture_start(&c);
	send_list(8); /* not from the scheduler */
	log = capture_end(&c);
	/* (node 8 is no node of this job yet: the list has not come) */
	assert_contains(log, "dropped a message (ADD_NODE) from node 8: not a node of this job");
	free(log);
	assert_false(psl__po.got_node_list);
	assert_int_equal(psl__po.start_err, 0);

	good_list();
	g_list[1].port = 5002;
	expect_list_refused("does not contain this node (127.0.0.1:5001)");
	node_down(NULL);

	worker_starting();
	good_list();
	g_nlist = 4; /* no scheduler */
	expect_list_refused("and no scheduler");
	node_down(NULL);

	worker_starting();
	good_list();
	g_list[3] = g_list[2]; /* one server twice, as far as counts go: 2 servers */
	g_list[3].id = 12;     /* ... but id 12 is past DMLC_NUM_SERVER=2 */
	g_list[3].port = 6002;
	expect_list_refused("server id 12, which does not fit DMLC_NUM_SERVER=2");
	node_down(NULL);

	worker_starting();
	good_list();
	g_list[0].role = PSL_SERVER; /* 3 servers (8 twice), 1 worker */
	g_list[0].id = 8;
	expect_list_refused("has 3 servers and 1 workers");
	node_down(NULL);

	worker_starting();
	good_list();
	g_list[4].id = 13;
	expect_list_refused("gives the scheduler id 13, expected 1");
	node_down(NULL);

	worker_starting();
	good_list();
	g_list[2].port = 0;
	expect_list_refused("incomplete entry");
	node_down(NULL);

	worker_starting();
	good_list();
	g_list[0].id = PSL_EMPTY;
	expect_list_refused("incomplete entry");
}

/* ------------------------------------------ control messages not sent -- */

/* The node list (2872 bytes for 2x2) cannot go to worker 1 (id 11): the
 * scheduler's start fails at once naming the message, the node and the
 * van's reason, and it tells every node it reached why. */
static void test_node_list_undeliverable(void **state)
{
	struct capture c;
	char *log;
	int i, aborts = 0;
	(void)state;

	scheduler_up(2, 2);
	g_fail_len = 2000;
	g_fail_rc = -EMSGSIZE;
	g_fail_to = 11;
	reg("10.0.0.10", 5000, PSL_WORKER, -1);
	reg("10.0.0.9", 4001, PSL_SERVER, -1);
	reg("10.0.0.10", 4000, PSL_SERVER, -1);
	capture_start(&c);
	reg("10.0.0.9", 5000, PSL_WORKER, -1);
	log = capture_end(&c);
	assert_contains(log, "ERROR: cannot send the node list (5 nodes, 2872 bytes) to worker 1 "
			     "(id 11, 10.0.0.10:5000): Message too long");
	free(log);
	assert_int_equal(g_nsent, 3); /* the other three went */
	assert_int_equal(psl__po.list_pending, 0);
	assert_int_equal(psl__po.start_err, -ECONNABORTED);
	assert_contains(psl__po.start_msg, "cannot send the node list (5 nodes, 2872 bytes) to "
					   "worker 1 (id 11");
	clear_sent();
	psl__control_abort_nodes(psl__cur, psl__po.start_err, psl__po.start_msg);
	for (i = 0; i < g_nsent; i++) {
		const struct sent *s = &g_sent[i];
		assert_int_equal(s->m.cmd, PSL_CMD_TERMINATE);
		assert_true(s->m.body_size > 20);
		assert_memory_equal(s->m.body, "pslite-abort: -103: cannot send the node list", 45);
		aborts |= 1 << (s->to - 8);
	}
	assert_int_equal(g_nsent, 4);
	assert_int_equal(aborts, 0xf); /* 8, 9, 10 and 11 */
}

/* A barrier release that cannot go: the timer tells the node and declares
 * it lost. */
static void test_release_undeliverable(void **state)
{
	struct capture c;
	char *log;
	unsigned gen;
	int i;
	(void)state;

	ready_2x2();
	g_fail_len = 1;
	g_fail_rc = -EPIPE;
	g_fail_to = 9;
	arrive(11, PSL_CMD_INSTANCE_BARRIER, 7, 0);
	arrive(8, PSL_CMD_INSTANCE_BARRIER, 7, 0);
	arrive(9, PSL_CMD_INSTANCE_BARRIER, 7, 0);
	arrive(10, PSL_CMD_INSTANCE_BARRIER, 7, 0);
	capture_start(&c);
	assert_int_equal(psl__control_barrier_arrive(psl__cur, 0, PSL_GROUP_ALL, PSL_CMD_INSTANCE_BARRIER, &gen),
			 0);
	log = capture_end(&c);
	assert_contains(log, "ERROR: cannot send the release of a barrier (INSTANCE_BARRIER) to worker 0 "
			     "(id 9");
	free(log);
	assert_int_equal(g_nsent, 3);
	assert_int_equal(psl__po.peers[9].undeliv_err, -EPIPE);
	g_fail_len = 0;
	clear_sent();
	capture_start(&c);
	psl__control_undeliv_tick(psl__cur);
	log = capture_end(&c);
	assert_contains(log, "lost worker 0 (id 9");
	assert_contains(log, "cannot send it the release of a barrier (INSTANCE_BARRIER): Broken pipe");
	free(log);
	assert_true(psl__po.peers[9].dead);
	assert_int_equal(psl__po.peers[9].undeliv_err, 0);
	for (i = 0; i < g_nsent; i++)
		if (g_sent[i].to == 9)
			break;
	assert_true(i < g_nsent);
	assert_int_equal(g_sent[i].m.cmd, PSL_CMD_TERMINATE);
	assert_contains(g_sent[i].m.body, "pslite-abort: -103: the scheduler cannot send this node "
					  "the release");
}

static void send_abort_to_me(const char *body)
{
	struct psl__meta m;
	uint8_t buf[1024];
	size_t len;
	psl__meta_init(&m);
	m.cmd = PSL_CMD_TERMINATE;
	m.body = body;
	m.body_size = (int)strlen(body);
	len = psl__meta_encode(&m, buf);
	deliver_raw(1, buf, len, 0, NULL, NULL);
}

/* A node waiting for its node list fails its start with the scheduler's
 * reason; a ready one fails its barrier and has lost the scheduler. */
static void test_node_takes_abort(void **state)
{
	struct capture c;
	char *log, why[400];
	(void)state;

	worker_starting();
	send_abort_to_me("pslite-abort: -103: cannot send the node list: Message too long");
	assert_int_equal(psl__po.start_err, -ECONNABORTED);
	assert_contains(psl__po.start_msg, "the scheduler at ");
	assert_contains(psl__po.start_msg, "stopped the job's start: cannot send the node list: "
					   "Message too long");
	node_down(NULL);

	node_up(2); /* a ready worker */
	psl__po.barrier_err = 0;
	capture_start(&c);
	send_abort_to_me("pslite-abort: nonsense");
	assert_int_equal(psl__po.barrier_err, -ECONNABORTED);
	assert_true(psl__po.peers[1].dead);
	assert_int_equal(psl__control_barrier_wait(psl__cur, PSL_GROUP_ALL, psl__po.barrier_gen),
			 -ECONNABORTED);
	log = capture_end(&c);
	assert_contains(log, "barrier (group 7) failed: the scheduler stopped the job: nonsense");
	free(log);
	node_down(NULL);

	/* told to stop where the barrier's error woke its finalize first (a
	 * ghost, heartbeat.c): the job is lost all the same, and says why */
	node_up(2);
	psl__po.barrier_err = 0;
	psl__po.state = PSL__FINALIZING;
	psl__po.job_lost_err = 0;
	send_abort_to_me("pslite-abort: -67: declared lost");
	assert_int_not_equal(psl_job_lost(why, sizeof(why)), 0);
	assert_contains(why, "lost the scheduler (");
	assert_contains(why, "declared lost");
	psl__po.barrier_err = 0;
}

/* A barrier request that cannot go fails the barrier at once. */
static void test_barrier_request_undeliverable(void **state)
{
	struct capture c;
	char *log;
	unsigned gen;
	(void)state;

	node_up(2);
	psl__po.barrier_err = 0;
	g_fail_len = 1;
	g_fail_rc = -EMSGSIZE;
	capture_start(&c);
	assert_int_equal(psl__control_barrier_arrive(psl__cur, 0, PSL_GROUP_ALL, PSL_CMD_INSTANCE_BARRIER, &gen),
			 -EMSGSIZE);
	assert_int_equal(psl__control_barrier_wait(psl__cur, PSL_GROUP_ALL, gen), -ECONNABORTED);
	log = capture_end(&c);
	assert_contains(log, "ERROR: cannot send a barrier request (INSTANCE_BARRIER, group 7) to "
			     "the scheduler");
	assert_contains(log, "barrier (group 7) failed: cannot send a barrier request "
			     "(INSTANCE_BARRIER, group 7)");
	free(log);
	psl__po.barrier_err = 0;
}

/* A running job of 2 servers and 1 worker, with PS_RECOVERY=1: server 1
 * (id 10) at 10.0.0.2:4001; nothing sent yet. */
static void recovery_job_up(void)
{
	scheduler_up(2, 1);
	reg("10.0.0.3", 5000, PSL_WORKER, 0);
	reg("10.0.0.2", 4001, PSL_SERVER, 1);
	reg("10.0.0.2", 4000, PSL_SERVER, 0);
	psl__po.got_node_list = true;
	psl__po.state = PSL__READY;
	psl__po.cfg.recovery = true;
	clear_sent();
}

/* PS_RECOVERY=1 (recovery.c): a server registering after the start takes
 * the place of the lost one of its DMLC_RANK; the newcomer gets the whole
 * list, its entry marked is_recovery, the others it alone. Before any loss
 * it waits; without PS_RECOVERY it is refused. */
static void test_recovery_takes_place(void **state)
{
	const struct sent *s;
	const struct psl__node *n;
	int i, to_new = -1, to_worker = -1;
	(void)state;

	recovery_job_up();
	reg_pslite("10.0.0.7", 4100, PSL_SERVER, 1); /* nobody lost yet: it waits */
	assert_int_equal(g_nsent, 0);
	psl__node_lost(psl__cur, 10, -ECONNRESET, "test");
	for (i = 0; i < g_nsent; i++) {
		if (g_sent[i].m.cmd != PSL_CMD_ADD_NODE)
			continue;
		if (g_sent[i].to == 10)
			to_new = i;
		else if (g_sent[i].to == 9)
			to_worker = i;
	}
	assert_true(to_new >= 0 && to_worker >= 0);
	s = &g_sent[to_new];
	assert_int_equal(s->m.node_size, 4);
	n = in_list(s, "10.0.0.7", 4100);
	assert_non_null(n);
	assert_int_equal(n->id, 10);
	assert_true(n->is_recovery);
	s = &g_sent[to_worker];
	assert_int_equal(s->m.node_size, 1);
	assert_int_equal(s->m.nodes[0].id, 10);
	assert_int_equal(s->m.nodes[0].port, 4100);
	assert_false(psl__po.peers[10].dead);
	assert_int_equal(psl__po.peers[10].node.port, 4100);
	assert_int_equal(psl__po.job_lost_err, 0); /* the job is whole again */
	/* without PS_RECOVERY a late registration is refused */
	psl__po.cfg.recovery = false;
	clear_sent();
	{
		struct capture c;
		char *log;
		capture_start(&c);
		reg("10.0.0.8", 4200, PSL_SERVER, 0);
		log = capture_end(&c);
		assert_contains(log, "set PS_RECOVERY=1 on the scheduler");
		free(log);
	}
}

/* A HEARTBEAT from server id "from", whose entry is host:port. */
static void heartbeat_from(int from, const char *host, int port)
{
	node_msg(PSL_CMD_HEARTBEAT, from, host, port, PSL_SERVER, 0);
}

/* How many cmd messages went to "to" (-1: to a spare id, >= 30000). */
static int count_sent(int cmd, int to)
{
	int i, n = 0;
	for (i = 0; i < g_nsent; i++)
		n += g_sent[i].m.cmd == cmd && (to < 0 ? g_sent[i].to >= 30000 : g_sent[i].to == to);
	return n;
}

/* A node declared lost that still runs (its host cut off, then back) sends
 * heartbeats under its old id: the scheduler does not answer them, and tells
 * it to stop, once, under a spare id, with the abort tag (heartbeat.c). Once
 * a newcomer took the place, the heartbeats from the old address are not
 * answered either, the newcomer's are. */
static void test_ghost_refused(void **state)
{
	struct capture c;
	char *log;
	int i;
	(void)state;

	recovery_job_up();
	heartbeat_from(10, "10.0.0.2", 4001); /* alive: answered */
	assert_int_equal(count_sent(PSL_CMD_HEARTBEAT, 10), 1);
	psl__node_lost(psl__cur, 10, -ETIMEDOUT, "test");
	clear_sent();
	capture_start(&c);
	heartbeat_from(10, "10.0.0.2", 4001);
	heartbeat_from(10, "10.0.0.2", 4001);
	log = capture_end(&c);
	assert_int_equal(count_sent(PSL_CMD_HEARTBEAT, 10), 0);
	assert_int_equal(count_sent(PSL_CMD_TERMINATE, -1), 1);
	for (i = 0; i < g_nsent; i++)
		if (g_sent[i].m.cmd == PSL_CMD_TERMINATE)
			assert_contains(g_sent[i].m.body, "pslite-abort: -");
	for (i = 0; i < g_nsent; i++)
		if (g_sent[i].m.cmd == PSL_CMD_TERMINATE)
			assert_contains(g_sent[i].m.body, "the scheduler declared this node "
							  "(10.0.0.2:4001) lost earlier");
	assert_contains(log, "WARN: refused a heartbeat from 10.0.0.2:4001, under the id of "
			     "server 1 (id 10");
	free(log);
	reg("10.0.0.7", 4100, PSL_SERVER, 1); /* the newcomer takes the place */
	assert_false(psl__po.peers[10].dead);
	clear_sent();
	heartbeat_from(10, "10.0.0.2", 4001);
	assert_int_equal(count_sent(PSL_CMD_HEARTBEAT, 10), 0);
	heartbeat_from(10, "10.0.0.7", 4100);
	assert_int_equal(count_sent(PSL_CMD_HEARTBEAT, 10), 1);
}

/* The ADD_NODE sent to node `to`, or NULL. */
static const struct sent *add_node_to(int to)
{
	int i;
	for (i = 0; i < g_nsent; i++)
		if (g_sent[i].m.cmd == PSL_CMD_ADD_NODE && g_sent[i].to == to)
			return &g_sent[i];
	return NULL;
}

/* A C++ ps-lite server (a registration without pslite's body) taking a lost
 * one's place gets its list at once; the others hear of it only at its
 * first heartbeat, which says it has the list: a C++ node that got a
 * worker's request before its list would abort (no id yet). */
static void test_recovery_cxx_server_news(void **state)
{
	const struct sent *s;
	(void)state;

	recovery_job_up();
	psl__po.cfg.heartbeat_interval = 1;
	psl__node_lost(psl__cur, 10, -ECONNRESET, "test");
	clear_sent();
	reg("10.0.0.7", 4100, PSL_SERVER, -1);
	s = add_node_to(10);
	assert_non_null(s);
	assert_int_equal(s->m.node_size, 4);
	assert_true(in_list(s, "10.0.0.7", 4100)->is_recovery);
	assert_null(add_node_to(9));
	assert_null(add_node_to(8));
	heartbeat_from(10, "10.0.0.7", 4100); /* now the others hear of it */
	s = add_node_to(9);
	assert_non_null(s);
	assert_int_equal(s->m.node_size, 1);
	assert_int_equal(s->m.nodes[0].id, 10);
	assert_int_equal(s->m.nodes[0].port, 4100);
	assert_non_null(add_node_to(8));
	psl__po.cfg.recovery = false;
	psl__po.cfg.heartbeat_interval = 0;
}

/* A worker taking a lost one's place: the servers hear of it before it gets
 * its list, so that none gets its first request before the news. */
static void test_recovery_worker_news_first(void **state)
{
	int i, first = -1, to_new = -1;
	(void)state;

	recovery_job_up();
	psl__node_lost(psl__cur, 9, -ECONNRESET, "test");
	clear_sent();
	reg_pslite("10.0.0.9", 5100, PSL_WORKER, -1);
	for (i = 0; i < g_nsent; i++) {
		if (g_sent[i].m.cmd != PSL_CMD_ADD_NODE)
			continue;
		if (g_sent[i].to == 9)
			to_new = i;
		else if (first < 0)
			first = i;
	}
	assert_true(first >= 0 && to_new >= 0);
	assert_true(first < to_new);
	assert_int_equal(g_sent[first].m.nodes[0].id, 9);
	assert_int_equal(g_sent[first].m.nodes[0].port, 5100);
	psl__po.cfg.recovery = false;
}

/* psl_dead_nodes (ps-lite's GetDeadNodes): the scheduler lists the nodes
 * it lost and, with heartbeats on, those silent for more than t seconds;
 * without heartbeats, a silent node is not dead. */
static void test_dead_nodes(void **state)
{
	int ids[4] = {0}, i;
	int64_t now = psl__now_ms();
	(void)state;

	recovery_job_up();
	psl__po.cfg.recovery = false;
	for (i = 8; i <= psl__po.max_id; i++)
		psl__po.peers[i].last_heartbeat_ms = now;
	assert_int_equal(psl_dead_nodes(5, ids, 4), 0);
	assert_int_equal(psl_dead_nodes(-1, ids, 4), -EINVAL);
	assert_int_equal(psl_dead_nodes(5, NULL, 4), -EINVAL);
	psl__node_lost(psl__cur, 10, -ECONNRESET, "test");
	assert_int_equal(psl_dead_nodes(5, ids, 4), 1);
	assert_int_equal(ids[0], 10);
	assert_int_equal(psl_dead_nodes(0, ids, 4), 0); /* as ps-lite */
	/* worker 0 (id 9) silent for 20 s: dead for t = 10 with heartbeats */
	psl__po.peers[9].last_heartbeat_ms = now - 20000;
	assert_int_equal(psl_dead_nodes(10, ids, 4), 1);
	psl__po.cfg.heartbeat_interval = 1;
	psl__po.cfg.heartbeat_timeout = 60;
	psl__po.cfg.heartbeat_all = true;
	assert_int_equal(psl_dead_nodes(10, ids, 4), 2);
	assert_int_equal(ids[0], 9);
	assert_int_equal(ids[1], 10);
	assert_int_equal(psl_dead_nodes(30, ids, 1), 1);
	assert_int_equal(psl_dead_nodes(10, NULL, 0), 2); /* how many there are */
	psl__po.cfg.heartbeat_interval = 0;
	psl__po.cfg.heartbeat_all = false;
	psl__po.state = PSL__STOPPED;
	assert_int_equal(psl_dead_nodes(10, ids, 4), -ESHUTDOWN);
}

/* A heartbeat that cannot go while this node waits in its final barrier
 * (the scheduler, released, may have left before this node got its own
 * release) is no error: only a DEBUG line; at any other time it is an
 * ERROR. */
static void test_heartbeat_at_end(void **state)
{
	struct psl__ctl_sent hb = {.cmd = PSL_CMD_HEARTBEAT, .recver = 1};
	struct capture c;
	char *log;
	(void)state;

	node_up_as(PSL_WORKER, 9, 1, 1);
	psl__po.state = PSL__READY;
	capture_start(&c);
	psl__control_sent(psl__cur, &hb, -ECONNRESET);
	log = capture_end(&c);
	assert_contains(log, "ERROR: cannot send a HEARTBEAT message");
	free(log);
	psl__po.leaving = true;
	capture_start(&c);
	psl__control_sent(psl__cur, &hb, -ECONNRESET);
	log = capture_end(&c);
	assert_null(strstr(log, "ERROR"));
	free(log);
	psl__po.leaving = false;
}

/* psl_my_address: the host and port the others reach this node at
 * (Van::my_node()'s) once started; ENOSPC for a short buffer, ESHUTDOWN
 * before the start */
static void test_my_address(void **state)
{
	char host[64], tiny[4];
	int port = 0;
	(void)state;

	recovery_job_up();
	assert_int_equal(psl_my_address(host, sizeof host, &port), 0);
	assert_string_equal(host, "10.0.0.1");
	assert_int_equal(port, 9000);
	assert_int_equal(psl_my_address(host, sizeof host, NULL), 0);
	assert_int_equal(psl_my_address(tiny, sizeof tiny, &port), -ENOSPC);
	assert_non_null(strstr(psl_last_error(), "9 bytes"));
	assert_int_equal(psl_my_address(NULL, 0, &port), -ENOSPC);
	psl__po.state = PSL__STOPPED;
	assert_int_equal(psl_my_address(host, sizeof host, &port), -ESHUTDOWN);
	assert_non_null(strstr(psl_last_error(), "after psl_start"));
}

#define T(f) cmocka_unit_test_teardown(f, scheduler_down)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_ids_and_node_list), T(test_ids_same_host_by_port),
		T(test_ids_by_rank),	   T(test_ranks_clash),
		T(test_registrations_refused), T(test_instance_barrier),
		T(test_group_barriers),	   T(test_grouped_barrier_kinds),
		T(test_barrier_node_lost),
		T(test_node_takes_list),   T(test_node_refuses_lists),
		T(test_node_list_undeliverable), T(test_release_undeliverable),
		T(test_node_takes_abort), T(test_barrier_request_undeliverable),
		T(test_recovery_takes_place), T(test_ghost_refused),
		T(test_recovery_cxx_server_news), T(test_recovery_worker_news_first),
		T(test_dead_nodes), T(test_my_address), T(test_heartbeat_at_end),
	};
	return cmocka_run_group_tests_name("control", tests, NULL, NULL);
}
