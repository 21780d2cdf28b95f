/*
 * Unit tests for core/env.c: psl__config_load over many environments.
 * Every failing case checks the error code and that the one-line message
 * names the variable, its value and what was expected.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <malloc.h>

#include "env.h"
#include "log.h"
#include "pslite.h"
#include "testutil.h"

/* Every variable psl__config_load reads: cleared before each test. */
static const char *const all_vars[] = {
	"DMLC_ROLE",	      "DMLC_PS_ROOT_URI",	  "DMLC_PS_ROOT_PORT",
	"DMLC_NUM_WORKER",    "DMLC_NUM_SERVER",	  "DMLC_GROUP_SIZE",
	"DMLC_NUM_PORTS",     "DMLC_PORT",		  "DMLC_RANK",
	"DMLC_NODE_HOST",     "DMLC_INTERFACE",		  "DMLC_ENABLE_RDMA",
	"DMLC_PS_VAN_TYPE",   "PS_VERBOSE",		  "PS_HEARTBEAT_INTERVAL",
	"PS_HEARTBEAT_TIMEOUT", "PS_RESEND",		  "PS_RESEND_TIMEOUT",
	"PS_CONNECT_TIMEOUT", "PS_START_TIMEOUT",	  "BYTEPS_ENABLE_MIXED_MODE",
	"BYTEPS_ORDERED_HOSTS", "DMLC_ENABLE_UCX",	  "PS_JOB_SECRET",
	"PS_JOB_SECRET_FILE", "BYTEPS_ENABLE_IPC", "PS_IPC_BUF_MB", "PS_IPC_MIN_BYTES",
	"DMLC_NODE_RANK", "STEPMESH_GPU", "DMLC_RANK_OFFSET",
	"STEPMESH_BIND_CPU_CORE", "STEPMESH_CPU_CORES_PER_GPU", "STEPMESH_CPU_CORES_PER_SOCKET",
	"STEPMESH_CPU_START_OFFSET", "PS_MALLOC_TUNE",
};

static struct psl__config cfg;
static char err[1024];

/* A valid worker environment; each test changes one thing. */
static int setup_worker(void **state)
{
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(all_vars) / sizeof(all_vars[0]); i++)
		unsetenv(all_vars[i]);
	for (i = 0; psl__env_compat_table[i].var; i++)
		unsetenv(psl__env_compat_table[i].var);
	psl__env_reads_clear();
	setenv("DMLC_ROLE", "worker", 1);
	setenv("DMLC_PS_ROOT_URI", "127.0.0.1", 1);
	setenv("DMLC_PS_ROOT_PORT", "9000", 1);
	setenv("DMLC_NUM_WORKER", "2", 1);
	setenv("DMLC_NUM_SERVER", "3", 1);
	setenv("DMLC_NODE_HOST", "127.0.0.1", 1);
	memset(&cfg, 0x5a, sizeof(cfg));
	memset(err, 0, sizeof(err));
	return 0;
}

static int load(void)
{
	return psl__config_load(&cfg, err, sizeof(err));
}

/* rc must be want, and err one line holding every needle. */
static void expect_error(int want, ...)
{
	va_list ap;
	const char *needle;
	int rc = load();
	if (rc != want)
		fail_msg("psl__config_load returned %d, expected %d (message: \"%s\")", rc, want,
			 err);
	assert_true(strlen(err) > 0);
	assert_null(strchr(err, '\n'));
	va_start(ap, want);
	while ((needle = va_arg(ap, const char *)))
		assert_contains(err, needle);
	va_end(ap);
}

static void expect_ok(void)
{
	int rc = load();
	if (rc)
		fail_msg("psl__config_load returned %d: %s", rc, err);
	assert_string_equal(err, "");
}

/* ----------------------------------------------------------------- valid -- */

static void test_valid_worker_defaults(void **state)
{
	(void)state;
	expect_ok();
	assert_int_equal(cfg.role, PSL_WORKER);
	assert_string_equal(cfg.root_uri, "127.0.0.1");
	assert_int_equal(cfg.root_port, 9000);
	assert_int_equal(cfg.num_workers, 2);
	assert_int_equal(cfg.num_servers, 3);
	assert_string_equal(cfg.node_host, "127.0.0.1");
	assert_int_equal(cfg.port, 0);
	assert_string_equal(cfg.van, "zmq");
	assert_string_equal(cfg.van_var, "default");
	assert_int_equal(cfg.verbose, 0);
	/* heartbeats are on by default, judged only for pslite nodes */
	assert_int_equal(cfg.heartbeat_interval, 2);
	assert_int_equal(cfg.heartbeat_timeout, 20);
	assert_false(cfg.heartbeat_all);
	assert_false(cfg.resend);
	assert_int_equal(cfg.resend_timeout_ms, 1000);
	assert_int_equal(cfg.preferred_rank, -1);
	/* the unreachable-scheduler bound: 60 s unless PS_CONNECT_TIMEOUT says */
	assert_int_equal(cfg.connect_timeout_s, 60);
	assert_int_equal(cfg.start_timeout_s, 300);
	assert_false(cfg.mixed_mode);
	assert_true(cfg.malloc_tune);
	assert_string_equal(cfg.ordered_hosts, "");
}

static void test_valid_settings(void **state)
{
	(void)state;
	setenv("DMLC_PORT", "4567", 1);
	setenv("DMLC_RANK", "1", 1);
	setenv("PS_VERBOSE", "2", 1);
	setenv("PS_HEARTBEAT_INTERVAL", "5", 1);
	setenv("PS_HEARTBEAT_TIMEOUT", "30", 1);
	setenv("PS_RESEND", "1", 1);
	setenv("PS_RESEND_TIMEOUT", "250", 1);
	setenv("PS_CONNECT_TIMEOUT", "2", 1);
	setenv("PS_START_TIMEOUT", "7", 1);
	setenv("BYTEPS_ENABLE_MIXED_MODE", "1", 1);
	setenv("BYTEPS_ORDERED_HOSTS", "10.0.0.2,10.0.0.1:9000", 1);
	setenv("DMLC_GROUP_SIZE", "1", 1);
	setenv("DMLC_NUM_PORTS", "1", 1);
	setenv("PS_MALLOC_TUNE", "0", 1);
	expect_ok();
	assert_false(cfg.malloc_tune);
	assert_int_equal(cfg.port, 4567);
	assert_int_equal(cfg.preferred_rank, 1);
	assert_int_equal(cfg.verbose, 2);
	assert_int_equal(cfg.heartbeat_interval, 5);
	assert_int_equal(cfg.heartbeat_timeout, 30);
	assert_true(cfg.heartbeat_all); /* set: every node is taken to send them */
	assert_true(cfg.resend);
	assert_int_equal(cfg.resend_timeout_ms, 250);
	assert_int_equal(cfg.connect_timeout_s, 2);
	assert_int_equal(cfg.start_timeout_s, 7);
	assert_true(cfg.mixed_mode);
	assert_string_equal(cfg.ordered_hosts, "10.0.0.2,10.0.0.1:9000");
}

static void test_scheduler_uses_root(void **state)
{
	(void)state;
	setenv("DMLC_ROLE", "scheduler", 1);
	setenv("DMLC_PS_ROOT_URI", "localhost", 1);
	setenv("DMLC_PORT", "1234", 1); /* the scheduler's port is the root port */
	setenv("DMLC_INTERFACE", "no-such-interface", 1); /* not consulted */
	expect_ok();
	assert_int_equal(cfg.role, PSL_SCHEDULER);
	assert_string_equal(cfg.node_host, "localhost");
	assert_int_equal(cfg.port, 9000);
}

static void test_server_role(void **state)
{
	(void)state;
	setenv("DMLC_ROLE", "server", 1);
	expect_ok();
	assert_int_equal(cfg.role, PSL_SERVER);
}

static void test_counts_accepted(void **state)
{
	(void)state;
	setenv("DMLC_NUM_WORKER", "16000", 1);
	setenv("DMLC_NUM_SERVER", "1", 1);
	expect_ok();
	assert_int_equal(cfg.num_workers, 16000);
	assert_int_equal(cfg.num_servers, 1);
	setenv("DMLC_NUM_SERVER", " 7 ", 1); /* blanks around a number are tolerated */
	expect_ok();
	assert_int_equal(cfg.num_servers, 7);
}

/* ------------------------------------------------------------- required -- */

static void test_missing_role(void **state)
{
	(void)state;
	unsetenv("DMLC_ROLE");
	expect_error(-ENOENT, "DMLC_ROLE", "not set", "expected scheduler, server, worker or joint",
		     NULL);
	setenv("DMLC_ROLE", "", 1); /* empty is missing */
	expect_error(-ENOENT, "DMLC_ROLE", "not set", NULL);
}

static void test_unknown_role(void **state)
{
	(void)state;
	setenv("DMLC_ROLE", "foo", 1);
	expect_error(-EINVAL, "DMLC_ROLE=foo", "expected scheduler, server, worker or joint", NULL);
	setenv("DMLC_ROLE", "Worker", 1); /* case matters, as in ps-lite */
	expect_error(-EINVAL, "DMLC_ROLE=Worker", NULL);
}

/* DMLC_ROLE=joint: one process, a server node and a worker node */
static void test_joint_role(void **state)
{
	(void)state;
	setenv("DMLC_ROLE", "joint", 1);
	expect_ok(); /* the process's first node: its server */
	assert_true(cfg.joint);
	assert_int_equal(cfg.role, PSL_SERVER);
	assert_int_equal(cfg.port, 0);
	assert_int_equal(psl__config_load_as(&cfg, PSL_WORKER, err, sizeof(err)), 0);
	assert_true(cfg.joint);
	assert_int_equal(cfg.role, PSL_WORKER);
	assert_int_equal(cfg.port, 0); /* both ports chosen by the system */
	setenv("DMLC_PORT", "9100", 1);
	expect_ok();
	assert_int_equal(cfg.port, 9100);
	assert_int_equal(psl__config_load_as(&cfg, PSL_WORKER, err, sizeof(err)), 0);
	assert_int_equal(cfg.port, 9101); /* the worker: the next port */
	setenv("DMLC_PORT", "65535", 1); /* no next port */
	expect_error(-EINVAL, "DMLC_PORT=65535", NULL);
	unsetenv("DMLC_PORT");
	/* a plain worker is not joint, and joint_role does not apply to it */
	setenv("DMLC_ROLE", "worker", 1);
	assert_int_equal(psl__config_load_as(&cfg, PSL_SERVER, err, sizeof(err)), 0);
	assert_false(cfg.joint);
	assert_int_equal(cfg.role, PSL_WORKER);
}

static void test_missing_each_required(void **state)
{
	static const char *const req[] = {"DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT",
					  "DMLC_NUM_WORKER", "DMLC_NUM_SERVER"};
	size_t i;
	for (i = 0; i < sizeof(req) / sizeof(req[0]); i++) {
		char saved[64];
		snprintf(saved, sizeof(saved), "%s", getenv(req[i]));
		unsetenv(req[i]);
		expect_error(-ENOENT, req[i], "is not set", "expected", NULL);
		setenv(req[i], "", 1);
		expect_error(-ENOENT, req[i], "is not set", NULL);
		setenv(req[i], saved, 1);
		expect_ok();
		(void)state;
	}
}

/* --------------------------------------------------------------- counts -- */

static void test_bad_counts(void **state)
{
	static const char *const vars[] = {"DMLC_NUM_WORKER", "DMLC_NUM_SERVER"};
	static const char *const bad[] = {"abc", "0", "-1", "1.5", "2x", "0x10",
					  "99999999999999999999", "--1", "+"};
	size_t i, j;
	char want[128];
	(void)state;
	for (i = 0; i < 2; i++) {
		for (j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
			setup_worker(NULL);
			setenv(vars[i], bad[j], 1);
			snprintf(want, sizeof(want), "%s=%s", vars[i], bad[j]);
			expect_error(-EINVAL, want, "expected a positive integer", NULL);
		}
	}
}

static void test_too_many_nodes(void **state)
{
	(void)state;
	setenv("DMLC_NUM_SERVER", "16001", 1);
	expect_error(-EINVAL, "DMLC_NUM_SERVER=16001", "at most 16000", NULL);
	setup_worker(NULL);
	setenv("DMLC_NUM_WORKER", "2147483647", 1);
	expect_error(-EINVAL, "DMLC_NUM_WORKER=2147483647", "at most 16000", NULL);
	setup_worker(NULL);
	setenv("DMLC_NUM_WORKER", "2147483648", 1); /* past INT_MAX */
	expect_error(-EINVAL, "DMLC_NUM_WORKER=2147483648", "positive integer", NULL);
}

static void test_bad_ports(void **state)
{
	static const char *const bad[] = {"70000", "0", "-1", "65536", "abc", "80a"};
	size_t j;
	char want[128];
	(void)state;
	for (j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
		setup_worker(NULL);
		setenv("DMLC_PS_ROOT_PORT", bad[j], 1);
		snprintf(want, sizeof(want), "DMLC_PS_ROOT_PORT=%s", bad[j]);
		expect_error(-EINVAL, want, "expected an integer from 1 to 65535", NULL);
	}
	setup_worker(NULL);
	setenv("DMLC_PS_ROOT_PORT", "65535", 1);
	expect_ok();
	assert_int_equal(cfg.root_port, 65535);
	setenv("DMLC_PORT", "65536", 1);
	expect_error(-EINVAL, "DMLC_PORT=65536", "expected an integer from 0 to 65535", NULL);
	setenv("DMLC_PORT", "-5", 1);
	expect_error(-EINVAL, "DMLC_PORT=-5", NULL);
	setenv("DMLC_PORT", "0", 1); /* 0: let the system choose */
	expect_ok();
	assert_int_equal(cfg.port, 0);
}

static void test_bad_other_numbers(void **state)
{
	static const struct {
		const char *var, *val, *expect;
	} cases[] = {
		{"PS_VERBOSE", "abc", "from 0 to 1000"},
		{"PS_VERBOSE", "-1", "from 0 to 1000"},
		{"PS_HEARTBEAT_INTERVAL", "-1", "from 0 to 86400"},
		{"PS_HEARTBEAT_TIMEOUT", "x", "from 0 to"},
		{"PS_RESEND", "yes", "from 0 to"},
		{"PS_RESEND_TIMEOUT", "0", "from 1 to 3600000"},
		{"PS_CONNECT_TIMEOUT", "0", "from 1 to 86400"},
		{"PS_CONNECT_TIMEOUT", "1e3", "from 1 to 86400"},
		{"PS_START_TIMEOUT", "-3", "from 1 to"},
		{"DMLC_RANK", "-2", "from -1 to"},
		{"DMLC_NUM_PORTS", "0", "positive integer"},
		{"DMLC_ENABLE_UCX", "2", "from 0 to 1"},
		{"BYTEPS_ENABLE_MIXED_MODE", "2", "from 0 to 1"},
		{"DMLC_GROUP_SIZE", "0", "from 1 to 16000"},
		{"DMLC_GROUP_SIZE", "two", "from 1 to 16000"},
		{"PS_MALLOC_TUNE", "yes", "from 0 to 1"},
	};
	size_t i;
	char want[128];
	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		setup_worker(NULL);
		setenv(cases[i].var, cases[i].val, 1);
		snprintf(want, sizeof(want), "%s=%s", cases[i].var, cases[i].val);
		expect_error(-EINVAL, want, cases[i].expect, NULL);
	}
}

/* A value of blanks only is no number: not 0, not "unset". */
static void test_blank_numbers(void **state)
{
	static const char *const vars[] = {"DMLC_PORT", "DMLC_RANK", "PS_VERBOSE", "PS_RESEND",
					   "PS_HEARTBEAT_INTERVAL", "PS_HEARTBEAT_TIMEOUT",
					   "BYTEPS_ENABLE_MIXED_MODE", "DMLC_NUM_SERVER"};
	static const char *const blanks[] = {" ", "  ", "\t", " \n"};
	size_t i, j;
	char want[64];
	long v = 77;
	char e[128];
	(void)state;
	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		for (j = 0; j < sizeof(blanks) / sizeof(blanks[0]); j++) {
			setup_worker(NULL);
			setenv(vars[i], blanks[j], 1);
			snprintf(want, sizeof(want), "%s=", vars[i]);
			expect_error(-EINVAL, want, "expected", NULL);
		}
	}
	assert_int_equal(psl__parse_int("X", " ", -1, 10, &v, e, sizeof(e)), -EINVAL);
	assert_int_equal(v, 77);
	assert_int_equal(psl__parse_int("X", " 3", -1, 10, &v, e, sizeof(e)), 0);
	assert_int_equal(v, 3);
}

/* Instance groups: StepMesh's rank = DMLC_NODE_RANK x DMLC_GROUP_SIZE +
 * STEPMESH_GPU + DMLC_RANK_OFFSET, or DMLC_RANK; the index rank % size. */
/* STEPMESH_BIND_CPU_CORE: StepMesh's core for its van's receive thread
 * (slot 2) of the node of each GPU, by default 48 cores a socket, 5 a GPU,
 * from core 10; off without STEPMESH_GPU; bad values refused. */
static void test_bind_cpu(void **state)
{
	static const int want[8] = {12, 17, 36, 41, 60, 65, 84, 89};
	int g;
	(void)state;
	for (g = 0; g < 8; g++)
		assert_int_equal(psl__stepmesh_cpu(g, 2, 5, 48, 10), want[g]);
	assert_int_equal(psl__stepmesh_cpu(0, 7, 5, 48, 10), 14); /* slot clamped to 4 */
	assert_int_equal(psl__stepmesh_cpu(1, 2, 2, 2, 0), 3);
	expect_ok();
	assert_int_equal(cfg.bind_cpu, -1);
	setenv("STEPMESH_BIND_CPU_CORE", "1", 1);
	expect_ok();
	assert_int_equal(cfg.bind_cpu, -1); /* no STEPMESH_GPU: StepMesh binds nothing */
	setenv("STEPMESH_GPU", "1", 1);
	expect_ok();
	assert_int_equal(cfg.bind_cpu, 17);
	assert_true(cfg.bind);
	setenv("STEPMESH_CPU_START_OFFSET", "0", 1);
	setenv("STEPMESH_CPU_CORES_PER_GPU", "1", 1);
	expect_ok();
	assert_int_equal(cfg.bind_cpu, 1);
	setenv("STEPMESH_CPU_CORES_PER_GPU", "0", 1);
	expect_error(-EINVAL, "STEPMESH_CPU_CORES_PER_GPU", NULL);
	setenv("STEPMESH_CPU_CORES_PER_GPU", "5", 1);
	setenv("STEPMESH_BIND_CPU_CORE", "yes", 1);
	expect_error(-EINVAL, "STEPMESH_BIND_CPU_CORE", NULL);
	setenv("STEPMESH_BIND_CPU_CORE", "0", 1);
	expect_ok();
	assert_int_equal(cfg.bind_cpu, -1);
}

static void test_group_size(void **state)
{
	(void)state;
	setenv("DMLC_GROUP_SIZE", "2", 1);
	expect_error(-EINVAL, "DMLC_GROUP_SIZE=2", "set DMLC_NODE_RANK", "STEPMESH_GPU", NULL);

	setenv("DMLC_NODE_RANK", "1", 1);
	setenv("STEPMESH_GPU", "1", 1);
	expect_ok();
	assert_int_equal(cfg.group_size, 2);
	assert_int_equal(cfg.worker_groups, 2);
	assert_int_equal(cfg.server_groups, 3);
	assert_int_equal(cfg.num_workers, 4);
	assert_int_equal(cfg.num_servers, 6);
	assert_int_equal(cfg.preferred_rank, 3);
	assert_int_equal(cfg.instance, 1);

	setenv("DMLC_NODE_RANK", "0", 1);
	setenv("STEPMESH_GPU", "0", 1);
	setenv("DMLC_RANK_OFFSET", "1", 1);
	expect_ok();
	assert_int_equal(cfg.preferred_rank, 1);
	assert_int_equal(cfg.instance, 1);
	unsetenv("DMLC_RANK_OFFSET");

	setenv("DMLC_NODE_RANK", "2", 1); /* rank 4 of 4 worker instances */
	expect_error(-EINVAL, "DMLC_NODE_RANK=2", "not below the 4 worker instances", NULL);
	setenv("DMLC_ROLE", "server", 1); /* 6 server instances: fine */
	expect_ok();
	assert_int_equal(cfg.preferred_rank, 4);
	assert_int_equal(cfg.instance, 0);
	setenv("DMLC_ROLE", "worker", 1);

	unsetenv("DMLC_NODE_RANK");
	setenv("DMLC_RANK", "3", 1); /* the instance's rank itself */
	expect_ok();
	assert_int_equal(cfg.preferred_rank, 3);
	assert_int_equal(cfg.instance, 1);
	setenv("DMLC_RANK", "4", 1);
	expect_error(-EINVAL, "DMLC_RANK=4 with DMLC_GROUP_SIZE=2", "0 to 3", NULL);
	unsetenv("DMLC_RANK");

	setenv("DMLC_ROLE", "scheduler", 1); /* one scheduler, no rank */
	expect_ok();
	assert_int_equal(cfg.instance, 0);
	assert_int_equal(cfg.num_workers, 4);

	setenv("DMLC_GROUP_SIZE", "8001", 1); /* 2 x 8001 worker instances */
	expect_error(-EINVAL, "DMLC_GROUP_SIZE=8001", "at most 16000", NULL);
	setenv("DMLC_GROUP_SIZE", "1", 1); /* as before: no rank needed */
	setenv("DMLC_ROLE", "worker", 1);
	expect_ok();
	assert_int_equal(cfg.preferred_rank, -1);
	assert_int_equal(cfg.num_workers, 2);
}

/* psl_start_group: instance i of the group this process runs whole */
static int load_inst(int joint_role, int i)
{
	return psl__config_load_inst(&cfg, joint_role, i, err, sizeof(err));
}

static void test_group_in_process(void **state)
{
	(void)state;
	setenv("DMLC_GROUP_SIZE", "2", 1);
	assert_int_equal(load_inst(PSL_SERVER, 1), -EINVAL); /* no group rank */
	assert_contains(err, "set DMLC_RANK (this process's worker group rank, 0 to 1)");
	setenv("DMLC_RANK", "1", 1); /* the group's rank, as StartPS's rank */
	setenv("DMLC_PORT", "9100", 1);
	assert_int_equal(load_inst(PSL_SERVER, 1), 0);
	assert_int_equal(cfg.preferred_rank, 3);
	assert_int_equal(cfg.instance, 1);
	assert_int_equal(cfg.port, 9101);
	assert_int_equal(load_inst(PSL_SERVER, 0), 0);
	assert_int_equal(cfg.preferred_rank, 2);
	assert_int_equal(cfg.port, 9100);
	setenv("DMLC_RANK", "2", 1); /* 2 worker groups */
	assert_int_equal(load_inst(PSL_SERVER, 0), -EINVAL);
	assert_contains(err, "DMLC_RANK=2 with psl_start_group and DMLC_GROUP_SIZE=2");
	assert_contains(err, "0 to 1 (DMLC_NUM_WORKER - 1)");
	unsetenv("DMLC_RANK");
	setenv("DMLC_NODE_RANK", "0", 1); /* StepMesh's name for it */
	assert_int_equal(load_inst(PSL_SERVER, 1), 0);
	assert_int_equal(cfg.preferred_rank, 1);
	unsetenv("DMLC_NODE_RANK");
	setenv("DMLC_NUM_WORKER", "1", 1); /* one group: its rank is 0 */
	assert_int_equal(load_inst(PSL_SERVER, 1), 0);
	assert_int_equal(cfg.preferred_rank, 1);
	assert_int_equal(cfg.instance, 1);
	setenv("DMLC_NUM_WORKER", "2", 1);

	/* joint: servers on DMLC_PORT + i, workers after them */
	setenv("DMLC_ROLE", "joint", 1);
	setenv("DMLC_RANK", "0", 1);
	assert_int_equal(load_inst(PSL_SERVER, 1), 0);
	assert_int_equal(cfg.role, PSL_SERVER);
	assert_int_equal(cfg.port, 9101);
	assert_int_equal(load_inst(PSL_WORKER, 1), 0);
	assert_int_equal(cfg.role, PSL_WORKER);
	assert_int_equal(cfg.port, 9103);
	assert_int_equal(cfg.preferred_rank, 1);
	setenv("DMLC_PORT", "65533", 1); /* 4 ports needed */
	assert_int_equal(load_inst(PSL_WORKER, 0), -EINVAL);
	assert_contains(err, "DMLC_PORT=65533");
	unsetenv("DMLC_PORT");
	assert_int_equal(load_inst(PSL_WORKER, 1), 0);
	assert_int_equal(cfg.port, 0); /* each picks a free one */

	setenv("DMLC_ROLE", "worker", 1);
	setenv("DMLC_GROUP_SIZE", "33", 1);
	assert_int_equal(load_inst(PSL_SERVER, 0), -EINVAL);
	assert_contains(err, "DMLC_GROUP_SIZE=33: one process runs at most 32");
	/* one instance per process (instance -1): as psl__config_load */
	setenv("DMLC_GROUP_SIZE", "2", 1);
	setenv("DMLC_RANK", "3", 1);
	assert_int_equal(load_inst(PSL_SERVER, -1), 0);
	assert_int_equal(cfg.preferred_rank, 3);
	assert_int_equal(cfg.instance, 1);
	/* STEPMESH_BIND_CPU_CORE: instance i serves GPU i */
	setenv("DMLC_RANK", "0", 1);
	setenv("STEPMESH_BIND_CPU_CORE", "1", 1);
	setenv("STEPMESH_GPU", "0", 1);
	assert_int_equal(load_inst(PSL_SERVER, 1), 0);
	assert_int_equal(cfg.bind_cpu, psl__stepmesh_cpu(1, 2, 5, 48, 10));
	unsetenv("STEPMESH_BIND_CPU_CORE");
	unsetenv("STEPMESH_GPU");
	unsetenv("DMLC_RANK");
	/* the scheduler is one node: DMLC_PORT is not spread over a group */
	setenv("DMLC_ROLE", "scheduler", 1);
	setenv("DMLC_PORT", "65535", 1);
	assert_int_equal(load_inst(PSL_SERVER, 0), 0);
	unsetenv("DMLC_PORT");
}

/* ------------------------------------------------------------------ van -- */

static void expect_van(const char *rdma, const char *type, const char *van, const char *var)
{
	setup_worker(NULL);
	if (rdma)
		setenv("DMLC_ENABLE_RDMA", rdma, 1);
	if (type)
		setenv("DMLC_PS_VAN_TYPE", type, 1);
	expect_ok();
	assert_string_equal(cfg.van, van);
	assert_string_equal(cfg.van_var, var);
}

static void test_van_choice(void **state)
{
	(void)state;
	expect_van(NULL, NULL, "zmq", "default");
	expect_van("", NULL, "zmq", "default");
	expect_van("0", NULL, "zmq", "DMLC_ENABLE_RDMA");
	expect_van("1", NULL, "ibverbs", "DMLC_ENABLE_RDMA");
	expect_van("ibverbs", NULL, "ibverbs", "DMLC_ENABLE_RDMA");
	expect_van("ucx", NULL, "ucx", "DMLC_ENABLE_RDMA");
	expect_van("fabric", NULL, "fabric", "DMLC_ENABLE_RDMA");
	expect_van("zmq", NULL, "zmq", "DMLC_ENABLE_RDMA");
	expect_van("my_Van-2", NULL, "my_Van-2", "DMLC_ENABLE_RDMA");
	/* ps-lite 1f763c2: DMLC_PS_VAN_TYPE when DMLC_ENABLE_RDMA is unset */
	expect_van(NULL, "ucx", "ucx", "DMLC_PS_VAN_TYPE");
	expect_van("", "fabric", "fabric", "DMLC_PS_VAN_TYPE");
	expect_van(NULL, "1", "ibverbs", "DMLC_PS_VAN_TYPE");
	expect_van("0", "ucx", "zmq", "DMLC_ENABLE_RDMA");
	expect_van("fabric", "ucx", "fabric", "DMLC_ENABLE_RDMA");
}

/* ps-lite (byteps branch): DMLC_ENABLE_UCX=1 takes van ucx over DMLC_ENABLE_RDMA */
static void test_enable_ucx(void **state)
{
	char vc[96];
	(void)state;
	setenv("DMLC_ENABLE_UCX", "1", 1);
	setenv("DMLC_ENABLE_RDMA", "fabric", 1);
	expect_ok();
	assert_string_equal(cfg.van, "ucx");
	assert_string_equal(psl__van_choice(&cfg, vc, sizeof(vc)), "DMLC_ENABLE_UCX=1 (ucx)");
	setenv("DMLC_ENABLE_UCX", "0", 1);
	expect_ok();
	assert_string_equal(cfg.van, "fabric");
}

/* ------------------------------------------------ env_compat.c: WARNs -- */

/* Runs psl__env_compat_warn(role) and returns what it logged (malloc'ed). */
static char *compat_log(int role, int *n)
{
	struct capture c;
	int saved = psl__log_level;
	psl__log_level = PSL_LOG_INFO;
	capture_start(&c);
	*n = psl__env_compat_warn(role);
	psl__log_level = saved;
	return capture_end(&c);
}

static void test_compat_named_cases(void **state)
{
	char *log;
	int n;
	(void)state;
	log = compat_log(PSL_WORKER, &n);
	assert_int_equal(n, 0);
	assert_string_equal(log, "");
	free(log);

	setenv("DMLC_SPLIT_QP_LAG", "2", 1);
	setenv("BYTEPS_IPC_COPY_NUM_THREADS", "4", 1);
	setenv("DMLC_WORKER_ID", "3", 1);
	setenv("STEPMESH_MEM_SYNC", "1", 1);
	setenv("DMLC_NUM_PORTS", "2", 1);
	setenv("BYTEPS_NUMA_ON", "1", 1); /* a server's: not a worker's (BytePS reads it) */
	expect_ok(); /* none of them stops a node */
	assert_int_equal(cfg.num_workers, 2);
	log = compat_log(PSL_WORKER, &n);
	assert_int_equal(n, 5);
	assert_int_equal(count_lines_with(log, "WARN"), 5);
	assert_int_equal(count_lines_with(log, "DMLC_SPLIT_QP_LAG=2: ignored: each pslite van "
					       "keeps one connection per peer"),
			 1);
	assert_int_equal(count_lines_with(log, "BYTEPS_IPC_COPY_NUM_THREADS=4: ignored: pslite's "
					       "IPC (BYTEPS_ENABLE_IPC=1) copies on the calling "
					       "thread"),
			 1);
	assert_int_equal(count_lines_with(log, "DMLC_WORKER_ID=3: not read by pslite with "
					       "DMLC_GROUP_SIZE=1: the scheduler gives ranks in "
					       "order of registration"),
			 1);
	assert_int_equal(count_lines_with(log, "STEPMESH_MEM_SYNC=1: ignored: each pslite buffer "
					       "says in the API whether it is GPU memory"),
			 1);
	assert_int_equal(count_lines_with(log, "DMLC_NUM_PORTS=2: ignored: pslite gives a node one "
					       "port"),
			 1);
	assert_int_equal(count_lines_with(log, "BYTEPS_NUMA_ON"), 0);
	free(log);

	/* a server: BytePS's NUMA variables are warned about, DMLC_WORKER_ID not */
	log = compat_log(PSL_SERVER, &n);
	assert_int_equal(n, 5);
	assert_int_equal(count_lines_with(log, "BYTEPS_NUMA_ON=1: ignored: BytePS's launcher binds "
					       "workers only"),
			 1);
	assert_int_equal(count_lines_with(log, "DMLC_WORKER_ID"), 0);
	free(log);
}

/* A value that asks for what pslite does anyway is not warned about. */
static void test_compat_quiet_values(void **state)
{
	char *log;
	int n;
	(void)state;
	setenv("DMLC_SPLIT_QP_LAG", "0", 1);
	setenv("BYTEPS_ENABLE_IPC", "0", 1);
	setenv("DMLC_NUM_PORTS", "1", 1);
	setenv("STEPMESH_BIND_CPU_CORE", "0", 1);
	setenv("DMLC_LOCAL", "", 1); /* empty is unset */
	expect_ok();
	log = compat_log(PSL_WORKER, &n);
	assert_int_equal(n, 0);
	assert_string_equal(log, "");
	free(log);
}

/* StepMesh's placement variables: not read (so warned about) without
 * instance groups, read (so not warned about) with them. */
static void test_compat_group_placement(void **state)
{
	char *log;
	int n;
	(void)state;
	setenv("STEPMESH_GPU", "1", 1);
	setenv("DMLC_RANK_OFFSET", "0", 1);
	log = compat_log(PSL_WORKER, &n);
	assert_int_equal(n, 2);
	assert_int_equal(count_lines_with(log, "STEPMESH_GPU=1: not read by pslite with "
					       "DMLC_GROUP_SIZE=1"),
			 1);
	free(log);
	setenv("DMLC_GROUP_SIZE", "2", 1);
	setenv("DMLC_NODE_RANK", "0", 1);
	log = compat_log(PSL_WORKER, &n);
	assert_int_equal(n, 0);
	free(log);
}

/* A variable the loaded van read is the van's (van_ibverbs may take the
 * RDMA depths): no WARN. */
static void test_compat_van_reads(void **state)
{
	char *log;
	int n;
	(void)state;
	setenv("BYTEPS_RDMA_RX_DEPTH", "512", 1);
	setenv("BYTEPS_RDMA_START_DEPTH", "128", 1);
	psl__env_note_read("BYTEPS_RDMA_RX_DEPTH");
	psl__env_note_read("BYTEPS_RDMA_RX_DEPTH");
	log = compat_log(PSL_WORKER, &n);
	assert_int_equal(n, 1);
	assert_int_equal(count_lines_with(log, "BYTEPS_RDMA_RX_DEPTH"), 0);
	assert_int_equal(count_lines_with(log, "BYTEPS_RDMA_START_DEPTH=128: ignored: queue depths "
					       "are the van's own settings"),
			 1);
	free(log);
	psl__env_reads_clear();
	log = compat_log(PSL_WORKER, &n);
	assert_int_equal(n, 2);
	free(log);
}

/* Every variable of the table: one WARN, in each role it names, naming the
 * variable and its value; none is also read by the core (env.c) */
static void test_compat_every_variable(void **state)
{
	const struct psl__env_compat *e;
	char want[160], *log;
	int role, n, expect;
	size_t i;
	(void)state;
	for (e = psl__env_compat_table; e->var; e++) {
		assert_non_null(e->what);
		assert_true(strncmp(e->what, "ignored: ", 9) == 0 ||
			    strncmp(e->what, "not ", 4) == 0);
		assert_true(e->roles != 0);
		/* (but DMLC_NUM_PORTS's value is checked, and the instance's rank is
		 * read only with DMLC_GROUP_SIZE > 1) */
		for (i = 0; i < sizeof(all_vars) / sizeof(all_vars[0]); i++)
			if (strcmp(e->var, "DMLC_NUM_PORTS") && strcmp(e->var, "DMLC_NODE_RANK") &&
			    strcmp(e->var, "STEPMESH_GPU") && strcmp(e->var, "DMLC_RANK_OFFSET"))
				assert_string_not_equal(e->var, all_vars[i]);
		setenv(e->var, "7 x\n", 1);
	}
	/* (a newline in a value is logged as ?: one line each) */
	for (role = PSL_SERVER; role <= PSL_SCHEDULER; role++) {
		expect = 0;
		log = compat_log(role, &n);
		for (e = psl__env_compat_table; e->var; e++) {
			snprintf(want, sizeof(want), "] WARN: %s=7 x?: %s", e->var, e->what);
			if (e->roles & (1u << role)) {
				expect++;
				if (count_lines_with(log, want) != 1)
					fail_msg("role %d: no line '%s'", role, want);
			}
		}
		assert_int_equal(n, expect);
		assert_int_equal(count_lines_with(log, "WARN"), expect);
		free(log);
	}
}

static void test_van_bad_names(void **state)
{
	static const char *const bad[] = {"../evil", "a b", "van/zmq", "zmq.so", "z;rm", "ü"};
	char want[128], longname[100];
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setup_worker(NULL);
		setenv("DMLC_ENABLE_RDMA", bad[i], 1);
		snprintf(want, sizeof(want), "DMLC_ENABLE_RDMA=%s", bad[i]);
		expect_error(-EINVAL, want, "expected 0 (zmq), 1 (ibverbs) or a van name", NULL);
	}
	setup_worker(NULL);
	setenv("DMLC_PS_VAN_TYPE", "x/y", 1);
	expect_error(-EINVAL, "DMLC_PS_VAN_TYPE=x/y", "expected", NULL);
	setup_worker(NULL);
	memset(longname, 'a', 64);
	longname[64] = 0;
	setenv("DMLC_ENABLE_RDMA", longname, 1);
	expect_error(-EINVAL, "DMLC_ENABLE_RDMA=aaaa", "van name", NULL);
	longname[63] = 0; /* 63 letters fit */
	setenv("DMLC_ENABLE_RDMA", longname, 1);
	expect_ok();
	assert_string_equal(cfg.van, longname);
}

/* ---------------------------------------------------------------- hosts -- */

static void test_host_lengths(void **state)
{
	char h[80];
	(void)state;
	memset(h, 'h', sizeof(h));
	h[63] = 0;
	setenv("DMLC_PS_ROOT_URI", h, 1);
	setenv("DMLC_NODE_HOST", h, 1);
	expect_ok();
	assert_string_equal(cfg.root_uri, h);
	assert_string_equal(cfg.node_host, h);

	h[63] = 'h';
	h[64] = 0;
	setenv("DMLC_PS_ROOT_URI", h, 1);
	expect_error(-EINVAL, "DMLC_PS_ROOT_URI=hhhh", "at most 63 bytes", NULL);
	setup_worker(NULL);
	setenv("DMLC_NODE_HOST", h, 1);
	expect_error(-EINVAL, "DMLC_NODE_HOST=hhhh", "at most 63 bytes", NULL);
	setup_worker(NULL);
	h[79] = 0;
	setenv("DMLC_ROLE", "scheduler", 1);
	setenv("DMLC_PS_ROOT_URI", h, 1);
	expect_error(-EINVAL, "DMLC_PS_ROOT_URI=", "at most 63 bytes", NULL);
}

/* Host names go into tcp:// endpoints and node lists: no blanks, slashes
 * or other characters no host name or address has. */
static void test_host_characters(void **state)
{
	static const char *const bad[] = {"bad host", "host/x", "a;b", "tab\there", "h\n"};
	static const char *const good[] = {"node-1.example.org", "10.0.0.1", "my_host", "::1",
					   "fe80::1%eth0"};
	char want[128];
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char shown[32], *p;
		/* the message stays one printable line: control characters show as '?' */
		snprintf(shown, sizeof(shown), "%s", bad[i]);
		for (p = shown; *p; p++)
			if ((unsigned char)*p < 0x20)
				*p = '?';
		setup_worker(NULL);
		setenv("DMLC_PS_ROOT_URI", bad[i], 1);
		snprintf(want, sizeof(want), "DMLC_PS_ROOT_URI=%s", shown);
		expect_error(-EINVAL, want, "expected a host name or address", NULL);
		setup_worker(NULL);
		setenv("DMLC_NODE_HOST", bad[i], 1);
		snprintf(want, sizeof(want), "DMLC_NODE_HOST=%s", shown);
		expect_error(-EINVAL, want, "expected a host name or address", NULL);
	}
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		setup_worker(NULL);
		setenv("DMLC_PS_ROOT_URI", good[i], 1);
		setenv("DMLC_NODE_HOST", good[i], 1);
		expect_ok();
		assert_string_equal(cfg.root_uri, good[i]);
		assert_string_equal(cfg.node_host, good[i]);
	}
}

static void test_interface(void **state)
{
	(void)state;
	unsetenv("DMLC_NODE_HOST");
	setenv("DMLC_INTERFACE", "nosuchif0", 1);
	expect_error(-ENODEV, "DMLC_INTERFACE=nosuchif0", "DMLC_NODE_HOST", NULL);
	/* "lo" is on every Linux machine, with 127.0.0.1 */
	setenv("DMLC_INTERFACE", "lo", 1);
	expect_ok();
	assert_string_equal(cfg.node_host, "127.0.0.1");
	/* DMLC_NODE_HOST wins over the interface */
	setenv("DMLC_NODE_HOST", "10.1.2.3", 1);
	setenv("DMLC_INTERFACE", "nosuchif0", 1);
	expect_ok();
	assert_string_equal(cfg.node_host, "10.1.2.3");
	/* neither: some IPv4 address, never empty */
	unsetenv("DMLC_NODE_HOST");
	unsetenv("DMLC_INTERFACE");
	expect_ok();
	assert_true(strlen(cfg.node_host) >= 7);
}

static void test_ordered_hosts_too_long(void **state)
{
	char *v = malloc(1100);
	(void)state;
	memset(v, '1', 1099);
	v[1099] = 0;
	setenv("BYTEPS_ORDERED_HOSTS", v, 1);
	expect_error(-EINVAL, "BYTEPS_ORDERED_HOSTS", "at most 1023 bytes", NULL);
	free(v);
}

/* The first problem found is the one reported, role first. */
static void test_first_error_wins(void **state)
{
	(void)state;
	setenv("DMLC_ROLE", "foo", 1);
	setenv("DMLC_NUM_SERVER", "abc", 1);
	expect_error(-EINVAL, "DMLC_ROLE=foo", NULL);
	assert_not_contains(err, "DMLC_NUM_SERVER");
}

/* -------------------------------------------------------------- helpers -- */

static void test_parse_int(void **state)
{
	long v = 12345;
	char e[128];
	(void)state;
	assert_int_equal(psl__parse_int("X", "42", 1, 100, &v, e, sizeof(e)), 0);
	assert_int_equal(v, 42);
	assert_int_equal(psl__parse_int("X", "-7", -10, 10, &v, e, sizeof(e)), 0);
	assert_int_equal(v, -7);
	v = 99;
	assert_int_equal(psl__parse_int("X", "101", 1, 100, &v, e, sizeof(e)), -EINVAL);
	assert_int_equal(v, 99); /* not written on failure */
	assert_string_equal(e, "X=101: expected an integer from 1 to 100");
	assert_int_equal(psl__parse_int("Y", "", 1, INT_MAX, &v, e, sizeof(e)), -EINVAL);
	assert_string_equal(e, "Y=: expected a positive integer");
	/* a small buffer truncates, never overflows */
	assert_int_equal(psl__parse_int("LONGNAME", "nope", 1, 2, &v, e, 8), -EINVAL);
	assert_int_equal(strlen(e), 7);
}

static void test_roles(void **state)
{
	(void)state;
	assert_int_equal(psl__role_from_string("scheduler"), PSL_SCHEDULER);
	assert_int_equal(psl__role_from_string("server"), PSL_SERVER);
	assert_int_equal(psl__role_from_string("worker"), PSL_WORKER);
	assert_int_equal(psl__role_from_string("workers"), -1);
	assert_int_equal(psl__role_from_string(""), -1);
	assert_int_equal(psl__role_from_string(NULL), -1);
	assert_string_equal(psl__role_name(PSL_SCHEDULER), "scheduler");
	assert_string_equal(psl__role_name(PSL_SERVER), "server");
	assert_string_equal(psl__role_name(PSL_WORKER), "worker");
	assert_string_equal(psl__role_name(PSL_JOINT), "joint");
	assert_int_equal(psl__role_from_string("joint"), PSL_JOINT);
	assert_string_equal(psl__role_name(4), "unknown");
	assert_string_equal(psl__role_name(-1), "unknown");
}

static void test_resolve_host(void **state)
{
	char out[64], e[256];
	(void)state;
	assert_int_equal(psl__resolve_host("myhost", "nosuchif0", out, sizeof(out), e, sizeof(e)),
			 0);
	assert_string_equal(out, "myhost");
	assert_int_equal(psl__resolve_host(NULL, "lo", out, sizeof(out), e, sizeof(e)), 0);
	assert_string_equal(out, "127.0.0.1");
	assert_int_equal(psl__resolve_host("", "nosuchif0", out, sizeof(out), e, sizeof(e)),
			 -ENODEV);
	assert_contains(e, "DMLC_INTERFACE=nosuchif0");
}

/* DMLC_INTERFACE=auto: the address that routes to the scheduler */
static void test_route_host(void **state)
{
	char out[64], e[256];
	(void)state;
	assert_int_equal(psl__route_host("127.0.0.1", 9000, out, sizeof(out), e, sizeof(e)), 0);
	assert_string_equal(out, "127.0.0.1");
	assert_int_equal(psl__route_host("no-such-host.invalid", 9000, out, sizeof(out), e,
					 sizeof(e)),
			 -EHOSTUNREACH);
	assert_contains(e, "DMLC_INTERFACE=auto");
	assert_contains(e, "no-such-host.invalid");
}

/* PS_JOB_SECRET, PS_JOB_SECRET_FILE */
static void test_job_secret(void **state)
{
	char path[] = "/tmp/pslite-secret-XXXXXX";
	int fd;
	(void)state;
	expect_ok();
	assert_int_equal(cfg.secret_len, 0);
	setenv("PS_JOB_SECRET", "open-sesame", 1);
	expect_ok();
	assert_int_equal(cfg.secret_len, 11);
	assert_memory_equal(cfg.secret, "open-sesame", 11);
	setenv("PS_JOB_SECRET", "short", 1);
	expect_error(-EINVAL, "PS_JOB_SECRET", "5 bytes", "expected 8 to 256", NULL);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "from-a-file\n", 12), 12);
	close(fd);
	setenv("PS_JOB_SECRET_FILE", path, 1);
	expect_error(-EINVAL, "PS_JOB_SECRET and PS_JOB_SECRET_FILE are both set", NULL);
	unsetenv("PS_JOB_SECRET");
	expect_ok();
	assert_int_equal(cfg.secret_len, 11);
	assert_memory_equal(cfg.secret, "from-a-file", 11);
	unlink(path);
	expect_error(-ENOENT, "PS_JOB_SECRET_FILE=", "cannot open it", NULL);
}

/* A short PS_HEARTBEAT_TIMEOUT shortens the default interval with it; 0 set
 * explicitly turns either off. */
static void test_heartbeat_defaults(void **state)
{
	(void)state;
	setenv("PS_HEARTBEAT_TIMEOUT", "5", 1);
	expect_ok();
	assert_int_equal(cfg.heartbeat_interval, 1);
	assert_int_equal(cfg.heartbeat_timeout, 5);
	assert_false(cfg.heartbeat_all);
	setenv("PS_HEARTBEAT_TIMEOUT", "0", 1);
	expect_ok();
	assert_int_equal(cfg.heartbeat_interval, 2);
	assert_int_equal(cfg.heartbeat_timeout, 0);
	unsetenv("PS_HEARTBEAT_TIMEOUT");
	setenv("PS_HEARTBEAT_INTERVAL", "0", 1);
	expect_ok();
	assert_int_equal(cfg.heartbeat_interval, 0);
	assert_int_equal(cfg.heartbeat_timeout, 20);
	assert_false(cfg.heartbeat_all);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup_worker, NULL)

/* PS_MALLOC_TUNE's change: blocks below 32 MiB come from the heap (with
 * glibc's defaults 1 MiB is mmapped and unmapped each time), once per
 * process; the user's own malloc settings win. */
static void test_malloc_tune(void **state)
{
	(void)state;
	assert_false(psl__malloc_user_tuned());
	setenv("MALLOC_TRIM_THRESHOLD_", "1000000", 1);
	assert_true(psl__malloc_user_tuned());
	unsetenv("MALLOC_TRIM_THRESHOLD_");
	setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=4096", 1);
	assert_true(psl__malloc_user_tuned());
	setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0", 1);
	assert_false(psl__malloc_user_tuned());
	unsetenv("GLIBC_TUNABLES");
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
	{
		struct mallinfo2 before = mallinfo2(), during;
		void *p;
		assert_true(psl__malloc_tune());
		p = malloc(1 << 20);
		assert_non_null(p);
		memset(p, 1, 1 << 20);
		during = mallinfo2();
		assert_int_equal(during.hblkhd, before.hblkhd); /* not mmapped */
		free(p);
	}
#endif
	assert_false(psl__malloc_tune()); /* once */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_valid_worker_defaults), T(test_valid_settings), T(test_heartbeat_defaults),
		T(test_malloc_tune),
		T(test_scheduler_uses_root),   T(test_server_role),
		T(test_counts_accepted),       T(test_missing_role),
		T(test_unknown_role), T(test_joint_role),	       T(test_missing_each_required),
		T(test_bad_counts),	       T(test_too_many_nodes),
		T(test_bad_ports),	       T(test_bad_other_numbers),
		T(test_blank_numbers),	       T(test_host_characters),
		T(test_group_size),	       T(test_group_in_process),
		T(test_bind_cpu),
		T(test_van_choice),
		T(test_van_bad_names),	       T(test_host_lengths),
		T(test_interface),	       T(test_ordered_hosts_too_long),
		T(test_first_error_wins),      T(test_parse_int),
		T(test_roles),		       T(test_resolve_host), T(test_route_host),
		T(test_enable_ucx),	       T(test_compat_named_cases),
		T(test_compat_quiet_values),   T(test_compat_group_placement),
		T(test_compat_van_reads),
		T(test_compat_every_variable),
		T(test_job_secret),
	};
	return cmocka_run_group_tests_name("env", tests, NULL, NULL);
}
