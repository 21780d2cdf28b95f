/*
 * Unit tests for tools/launch.c, what pslite-run needs to start jobs across
 * machines: the task -> role mapping of --slurm, --mpi and --k8s (default
 * rule, -s, --servers-per-node, bad shapes), Slurm's host lists and task
 * counts, StatefulSet ordinals, host files (lines, files, placement, too
 * few slots), shell quoting and the variables passed over ssh; and
 * tools/blame.c: which node a count refusal shows to be misconfigured.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "blame.h"
#include "launch.h"

static char err[512];

/* the role letter and rank of every task ("S s0 s1 w0 w1") must be want */
static void expect_map(long ntasks, long servers, long spn, const long *per_node, long nnodes,
		       const char *want)
{
	char out[256];
	size_t cap = sizeof(out);
	long g;
	out[0] = 0;
	for (g = 0; g < ntasks; g++) {
		struct psl_launch_job job = {g, ntasks, servers, spn, per_node, nnodes};
		struct psl_launch_place pl;
		size_t len = strlen(out);
		assert_int_equal(psl_launch_map(&job, &pl, err, sizeof(err)), 0);
		if (pl.role == PSL_LAUNCH_SCHEDULER)
			snprintf(out + len, cap - len, "%sS", g ? " " : "");
		else
			snprintf(out + len, cap - len, " %c%ld",
				 pl.role == PSL_LAUNCH_SERVER ? 's' : 'w', pl.rank);
	}
	assert_string_equal(out, want);
}

static void test_map_default(void **state)
{
	struct psl_launch_job job = {4, 5, 0, 0, NULL, 0};
	struct psl_launch_place pl;
	(void)state;
	expect_map(5, 0, 0, NULL, 0, "S s0 s1 w0 w1");
	expect_map(3, 0, 0, NULL, 0, "S s0 w0");
	expect_map(6, 0, 0, NULL, 0, "S s0 s1 w0 w1 w2");
	expect_map(6, 1, 0, NULL, 0, "S s0 w0 w1 w2 w3");
	assert_int_equal(psl_launch_map(&job, &pl, err, sizeof(err)), 0);
	assert_int_equal(pl.nserver, 2);
	assert_int_equal(pl.nworker, 2);
}

static void test_map_bad(void **state)
{
	struct psl_launch_place pl;
	struct psl_launch_job two = {0, 2, 0, 0, NULL, 0}, big = {0, 5, 4, 0, NULL, 0},
			      out = {5, 5, 0, 0, NULL, 0}, neg = {-1, 5, 0, 0, NULL, 0},
			      noinfo = {1, 5, 0, 1, NULL, 0};
	(void)state;
	assert_int_equal(psl_launch_map(&two, &pl, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "2 tasks: a job needs at least 3"));
	assert_int_equal(psl_launch_map(&big, &pl, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "4 servers leave no worker"));
	assert_int_equal(psl_launch_map(&out, &pl, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "task 5 is outside"));
	assert_int_equal(psl_launch_map(&neg, &pl, err, sizeof(err)), -1);
	assert_int_equal(psl_launch_map(&noinfo, &pl, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--servers-per-node needs"));
}

static void test_map_per_node(void **state)
{
	static const long two[] = {3, 2}, three[] = {4, 4, 4}, uneven[] = {2, 3}, short1[] = {3, 1};
	struct psl_launch_place pl;
	struct psl_launch_job small = {0, 4, 0, 2, short1, 2}, sum = {0, 6, 0, 1, two, 2},
			      none = {0, 4, 0, 1, (const long[]){2, 2}, 2};
	(void)state;
	/* node 0: scheduler, server 0, worker 0; node 1: server 1, worker 1 */
	expect_map(5, 0, 1, two, 2, "S s0 w0 s1 w1");
	/* 2 servers a node: node 0 S s0 s1 w0, node 1 s2 s3 w1 w2, node 2 s4 s5 w3 w4 */
	expect_map(12, 0, 2, three, 3, "S s0 s1 w0 s2 s3 w1 w2 s4 s5 w3 w4");
	expect_map(5, 0, 1, uneven, 2, "S s0 s1 w0 w1");
	/* node 1 has 1 task: no room for 2 servers */
	assert_int_equal(psl_launch_map(&small, &pl, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "node 1 has 1 task, fewer than --servers-per-node 2"));
	assert_int_equal(psl_launch_map(&sum, &pl, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "add up to 5, not to the job's 6"));
	assert_int_equal(psl_launch_map(&none, &pl, err, sizeof(err)), 0);
	none.task = 0;
	none.servers_per_node = 1;
	none.per_node = (const long[]){1, 3};
	assert_int_equal(psl_launch_map(&none, &pl, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "node 0 has 0 tasks besides the scheduler"));
	none.per_node = (const long[]){2, 1};
	none.ntasks = 3;
	assert_int_equal(psl_launch_map(&none, &pl, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "leaves no worker"));
}

static void expect_hosts(const char *list, const char *want)
{
	char **h, buf[1024] = "";
	size_t n, i;
	assert_int_equal(psl_hostlist_expand(list, &h, &n, err, sizeof(err)), 0);
	for (i = 0; i < n; i++) {
		strcat(buf, i ? " " : "");
		strcat(buf, h[i]);
	}
	assert_string_equal(buf, want);
	psl_hostlist_free(h, n);
}

static void test_hostlist(void **state)
{
	static const char *const bad[] = {"n[1-",	 "n[a]", "n[3-1]",	"a,,b", "",
					  "n]1",	 "n[1-]", "n[1,,2]", "n[-2]", ",a",
					  "n[0-99999]", NULL};
	char **h;
	size_t n;
	int i;
	(void)state;
	expect_hosts("node[01-03,7]", "node01 node02 node03 node7");
	expect_hosts("vm", "vm");
	expect_hosts("a,b[1-2]c,d", "a b1c b2c d");
	expect_hosts("rack[1-2]-n[1-2]", "rack1-n1 rack1-n2 rack2-n1 rack2-n2");
	expect_hosts("x[009-011],y[8]", "x009 x010 x011 y8");
	expect_hosts("gpu-a100-[1-2],cpu", "gpu-a100-1 gpu-a100-2 cpu");
	for (i = 0; bad[i]; i++) {
		err[0] = 0;
		if (psl_hostlist_expand(bad[i], &h, &n, err, sizeof(err)) == 0)
			fail_msg("'%s' was accepted", bad[i]);
		assert_true(strlen(err) > 0);
		assert_null(strchr(err, '\n'));
	}
}

static void test_tasks_per_node(void **state)
{
	static const char *const bad[] = {"2(x",  "a",	  "2,", "2(3)", "2(x0)", "-1",
					  "2(x2", "1 2", "",	"(x2)", NULL};
	long *c, n;
	int i;
	(void)state;
	assert_int_equal(psl_tasks_per_node("2(x3),1", &c, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 4);
	assert_int_equal(c[0], 2);
	assert_int_equal(c[2], 2);
	assert_int_equal(c[3], 1);
	free(c);
	assert_int_equal(psl_tasks_per_node("5", &c, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 1);
	assert_int_equal(c[0], 5);
	free(c);
	for (i = 0; bad[i]; i++)
		if (psl_tasks_per_node(bad[i], &c, &n, err, sizeof(err)) == 0)
			fail_msg("'%s' was accepted", bad[i]);
}

static void test_k8s_ordinal(void **state)
{
	(void)state;
	assert_int_equal(psl_k8s_ordinal("ps-worker-3"), 3);
	assert_int_equal(psl_k8s_ordinal("psl-job-0"), 0);
	assert_int_equal(psl_k8s_ordinal("psl-job-12"), 12);
	assert_int_equal(psl_k8s_ordinal("ps"), -1);
	assert_int_equal(psl_k8s_ordinal("ps-"), -1);
	assert_int_equal(psl_k8s_ordinal("ps-3a"), -1);
	assert_int_equal(psl_k8s_ordinal("12"), -1);
	assert_int_equal(psl_k8s_ordinal(NULL), -1);
}

static void test_hostfile_line(void **state)
{
	static const char *const bad[] = {"h slots=0",	"h slots=x",	 "h slots=",	"h roles=boss",
					  "h roles=",	"h addr=",	 "h port=22",	"h extra",
					  "slots=2",	"-oProxy=x h", NULL};
	struct psl_host h;
	int i;
	(void)state;
	assert_int_equal(psl_hostfile_line("  # only a comment", &h, err, sizeof(err)), 1);
	assert_int_equal(psl_hostfile_line("", &h, err, sizeof(err)), 1);
	assert_int_equal(psl_hostfile_line("node1", &h, err, sizeof(err)), 0);
	assert_string_equal(h.name, "node1");
	assert_int_equal(h.slots, 1);
	assert_int_equal(h.roles, 7);
	assert_int_equal(psl_hostfile_line("10.0.0.2\tslots=4 roles=server,worker addr=10.1.0.2 "
					   "interface=ib0 # gpu box\r",
					   &h, err, sizeof(err)),
			 0);
	assert_string_equal(h.name, "10.0.0.2");
	assert_int_equal(h.slots, 4);
	assert_int_equal(h.roles, (1u << PSL_LAUNCH_SERVER) | (1u << PSL_LAUNCH_WORKER));
	assert_string_equal(h.addr, "10.1.0.2");
	assert_string_equal(h.iface, "ib0");
	for (i = 0; bad[i]; i++) {
		err[0] = 0;
		if (psl_hostfile_line(bad[i], &h, err, sizeof(err)) != -1)
			fail_msg("'%s' was accepted", bad[i]);
		assert_true(strlen(err) > 0);
	}
}

static void test_hostfile_read(void **state)
{
	char path[] = "/tmp/test_launch.XXXXXX";
	struct psl_host *h;
	size_t n;
	int fd = mkstemp(path);
	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "# hosts\nh1 slots=2\n\nh2\n", 23), 23);
	assert_int_equal(psl_hostfile_read(path, &h, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(h[1].name, "h2");
	free(h);
	assert_int_equal(write(fd, "h3 slots=many\n", 14), 14);
	assert_int_equal(psl_hostfile_read(path, &h, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, ":5: slots=many: expected an integer"));
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(psl_hostfile_read(path, &h, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "names no host"));
	close(fd);
	unlink(path);
	assert_int_equal(psl_hostfile_read(path, &h, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot read the host file"));
}

static void test_hostfile_place(void **state)
{
	struct psl_host h[3];
	size_t where[8];
	(void)state;
	memset(h, 0, sizeof(h));
	strcpy(h[0].name, "a");
	strcpy(h[1].name, "b");
	strcpy(h[2].name, "c");
	h[0].slots = h[1].slots = h[2].slots = 2;
	h[0].roles = h[1].roles = h[2].roles = 7;
	/* round robin: S a, s0 b, s1 c, w0 a, w1 b */
	assert_int_equal(psl_hostfile_place(h, 3, 2, 2, where, err, sizeof(err)), 0);
	assert_int_equal(where[0], 0);
	assert_int_equal(where[1], 1);
	assert_int_equal(where[2], 2);
	assert_int_equal(where[3], 0);
	assert_int_equal(where[4], 1);
	/* a takes the scheduler only: everything else on b and c */
	h[0].roles = 1u << PSL_LAUNCH_SCHEDULER;
	h[1].slots = h[2].slots = 3;
	assert_int_equal(psl_hostfile_place(h, 3, 2, 2, where, err, sizeof(err)), 0);
	assert_int_equal(where[0], 0);
	assert_int_equal(where[1], 1);
	assert_int_equal(where[2], 2);
	assert_int_equal(where[3], 1);
	assert_int_equal(where[4], 2);
	/* too few in all */
	h[0].roles = 7;
	h[0].slots = h[1].slots = h[2].slots = 1;
	assert_int_equal(psl_hostfile_place(h, 3, 2, 2, where, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "the job is 5 processes"));
	assert_non_null(strstr(err, "has 3 slots"));
	/* enough in all, but no host takes workers besides a full one */
	h[0].slots = h[1].slots = h[2].slots = 2;
	h[1].roles = h[2].roles = 1u << PSL_LAUNCH_SERVER;
	assert_int_equal(psl_hostfile_place(h, 3, 1, 2, where, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no free slot for worker 1"));
}

static void test_shell_quote(void **state)
{
	char buf[64] = "env";
	char tiny[8] = "";
	(void)state;
	assert_int_equal(psl_shell_quote(buf, sizeof(buf), "A=it's"), 0);
	assert_int_equal(psl_shell_quote(buf, sizeof(buf), "$HOME `x`"), 0);
	assert_string_equal(buf, "env 'A=it'\\''s' '$HOME `x`'");
	assert_int_equal(psl_shell_quote(tiny, sizeof(tiny), "abcdefgh"), -1);
	assert_int_equal(psl_shell_quote(tiny, sizeof(tiny), ""), 0);
	assert_string_equal(tiny, "''");
}

static void test_env_passed(void **state)
{
	(void)state;
	assert_true(psl_launch_env_passed("DMLC_NUM_WORKER=2"));
	assert_true(psl_launch_env_passed("PS_VERBOSE=1"));
	assert_true(psl_launch_env_passed("BYTEPS_ENABLE_IPC=1"));
	assert_true(psl_launch_env_passed("UCX_TLS=tcp"));
	assert_true(psl_launch_env_passed("FI_PROVIDER=tcp"));
	assert_false(psl_launch_env_passed("HOME=/root"));
	assert_false(psl_launch_env_passed("PATH=/bin"));
	assert_false(psl_launch_env_passed("PSX=1"));
}

/* the refusal lines core/registration.c logs, at the node and at the
 * scheduler, name the odd one by what pslite-run set */
static void test_blame(void **state)
{
	struct psl_blame b;
	char out[600];
	(void)state;
	assert_true(psl_blame_parse(
	    "[pslite 17:05:53.412 worker] ERROR: the scheduler at 127.0.0.1:32673 refused this "
	    "node's registration: DMLC_NUM_SERVER=2 at the worker at 127.0.0.1:38963, but "
	    "DMLC_NUM_SERVER=1 at the scheduler at 127.0.0.1:32673: set the same value on every "
	    "node",
	    &b));
	assert_true(b.own);
	assert_string_equal(b.var, "DMLC_NUM_SERVER");
	assert_int_equal(b.node_val, 2);
	assert_int_equal(b.sched_val, 1);
	assert_string_equal(b.node, "worker at 127.0.0.1:38963");
	assert_int_equal(psl_blame_judge(&b, 1, "worker 0", out, sizeof(out)), 1);
	assert_non_null(strstr(out, "worker 0 (the worker at 127.0.0.1:38963) is misconfigured: "
				    "it has DMLC_NUM_SERVER=2, but pslite-run set DMLC_NUM_SERVER=1"));
	assert_int_equal(psl_blame_judge(&b, 2, "worker 0", out, sizeof(out)), 2);
	assert_non_null(strstr(out, "the scheduler is misconfigured: it has DMLC_NUM_SERVER=1"));
	assert_int_equal(psl_blame_judge(&b, 3, "worker 0", out, sizeof(out)), 0);

	assert_true(psl_blame_parse(
	    "ERROR: refused the registration of the server at [::1]:4000: DMLC_GROUP_SIZE=4 at "
	    "the server at [::1]:4000, but DMLC_GROUP_SIZE=1 at the scheduler at [::1]:9: set",
	    &b));
	assert_false(b.own);
	assert_string_equal(b.node, "server at [::1]:4000");
	assert_int_equal(psl_blame_judge(&b, 1, "scheduler", out, sizeof(out)), 1);
	assert_non_null(strstr(out, "the server at [::1]:4000 is misconfigured"));

	assert_false(psl_blame_parse("INFO: worker listening on 127.0.0.1:38963", &b));
	assert_false(psl_blame_parse("refused this node's registration: the job's 1 server", &b));
	assert_false(psl_blame_parse("refused this node's registration: DMLC_NUM_SERVER=2 at the "
				     "worker at h:1, but DMLC_NUM_WORKER=1 at the scheduler",
				     &b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_default),    cmocka_unit_test(test_map_bad),
		cmocka_unit_test(test_map_per_node),   cmocka_unit_test(test_hostlist),
		cmocka_unit_test(test_tasks_per_node), cmocka_unit_test(test_k8s_ordinal),
		cmocka_unit_test(test_hostfile_line),  cmocka_unit_test(test_hostfile_read),
		cmocka_unit_test(test_hostfile_place), cmocka_unit_test(test_shell_quote),
		cmocka_unit_test(test_env_passed),     cmocka_unit_test(test_blame),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
