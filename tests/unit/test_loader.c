/*
 * Unit tests for core/van_loader.c against real shared objects built only
 * for the tests (tests/unit/vans/testvan.c): a good van, a wrong ABI major,
 * an entry for another ABI only, no entry symbol, a name mismatch, a missing
 * mandatory operation, a short ops table, a NULL ops table, and an init that
 * says "no device". Then the search path, and the same vans chosen with
 * DMLC_ENABLE_RDMA through psl_start.
 */
#define _GNU_SOURCE 1
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "pslite.h"
#include "van_loader.h"
#include "testutil.h"

#ifndef TEST_VANDIR
#error TEST_VANDIR must name the folder of the test vans
#endif

static char err[2048];
static struct psl__van_lib lib;
static char tmpdir[PATH_MAX];

static const char *van_path(const char *name)
{
	static char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/van_%s.so", TEST_VANDIR, name);
	return p;
}

static int setup(void **state)
{
	(void)state;
	memset(err, 0, sizeof(err));
	memset(&lib, 0, sizeof(lib));
	unsetenv("PS_VAN_PATH");
	snprintf(tmpdir, sizeof(tmpdir), "%s/psl-loader-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(tmpdir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];
	(void)state;
	psl__van_close(&lib);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* Opens test van `name` by path; expects rc and every needle in err, which
 * must also name the file. */
static void expect_open(const char *name, int want, ...)
{
	va_list ap;
	const char *needle;
	const char *path = van_path(name);
	int rc = psl__van_open_path(path, NULL, &lib, err, sizeof(err));
	if (rc != want)
		fail_msg("%s: rc %d, expected %d (%s)", path, rc, want, err);
	if (want == 0) {
		assert_non_null(lib.dl);
		assert_non_null(lib.ops);
		return;
	}
	assert_null(lib.dl);
	assert_null(lib.ops);
	assert_null(strchr(err, '\n'));
	assert_contains(err, path);
	va_start(ap, want);
	while ((needle = va_arg(ap, const char *)))
		assert_contains(err, needle);
	va_end(ap);
}

/* ------------------------------------------------------------ one file -- */

static void test_good(void **state)
{
	struct psl_van *v = NULL;
	struct psl_van_host host;
	struct psl_van_caps caps;
	(void)state;
	expect_open("good", 0);
	assert_string_equal(lib.ops->name, "good");
	assert_string_equal(lib.path, van_path("good"));
	assert_int_equal(PSL_VAN_ABI_MAJOR_OF(lib.ops->abi_version), PSL_VAN_ABI_MAJOR);
	memset(&host, 0, sizeof(host));
	host.abi_version = PSL_VAN_ABI_VERSION;
	host.size = sizeof(host);
	assert_int_equal(lib.ops->init(&host, &v), 0);
	memset(&caps, 0, sizeof(caps));
	assert_int_equal(lib.ops->query(v, &caps), 0);
	assert_int_equal(caps.max_msg_size, 12345);
	lib.ops->fini(v);
	/* an explicit expected name that matches works too */
	psl__van_close(&lib);
	assert_null(lib.ops);
	assert_int_equal(psl__van_open_path(van_path("good"), "good", &lib, err, sizeof(err)), 0);
}

static void test_wrong_abi_major(void **state)
{
	(void)state;
	expect_open("abi2", -EPROTO, "built for van ABI 2.0", "expected ABI 1.x", "rebuild the van",
		    NULL);
}

static void test_entry_for_other_abi_only(void **state)
{
	(void)state;
	expect_open("v2only", -EPROTO, "built for van ABI 2", "exports psl_van_entry_v2",
		    "loads van ABI 1", "psl_van_entry_v1", NULL);
}

static void test_no_entry(void **state)
{
	(void)state;
	expect_open("noentry", -ENOEXEC, "does not export psl_van_entry_v1",
		    "expected a pslite van", NULL);
}

static void test_name_mismatch(void **state)
{
	(void)state;
	expect_open("badname", -EPROTO, "calls itself 'other'", "expected 'badname'",
		    "van_badname.so", NULL);
	/* and with the name given by the caller */
	assert_int_equal(psl__van_open_path(van_path("good"), "zmq", &lib, err, sizeof(err)),
			 -EPROTO);
	assert_contains(err, "calls itself 'good', expected 'zmq'");
}

static void test_missing_op(void **state)
{
	(void)state;
	expect_open("nosend", -EPROTO, "missing mandatory operation send",
		    "init, fini, query, bind, connect and send are required", NULL);
	assert_not_contains(err, "operation init");
}

static void test_short_ops(void **state)
{
	(void)state;
	expect_open("small", -EPROTO, "operations table is 40 bytes", "expected at least", NULL);
}

static void test_null_ops(void **state)
{
	(void)state;
	expect_open("nullops", -ENOEXEC, "returned no operations table", NULL);
}

static void test_init_nodev(void **state)
{
	struct psl_van *v = NULL;
	struct psl_van_host host;
	(void)state;
	expect_open("nodev", 0);
	memset(&host, 0, sizeof(host));
	host.abi_version = PSL_VAN_ABI_VERSION;
	host.size = sizeof(host);
	host.log_level = -1; /* the van logs only through vlog, which is NULL here */
	assert_int_equal(lib.ops->init(&host, &v), -ENODEV);
	assert_null(v);
}

static void test_not_a_van_name(void **state)
{
	char p[PATH_MAX + 32];
	(void)state;
	snprintf(p, sizeof(p), "%s/libfoo.so", tmpdir);
	assert_int_equal(psl__van_open_path(p, NULL, &lib, err, sizeof(err)), -EINVAL);
	assert_contains(err, p);
	assert_contains(err, "expected a file named van_<name>.so");
	assert_int_equal(psl__van_open_path("van_.so", NULL, &lib, err, sizeof(err)), -EINVAL);
	assert_int_equal(psl__van_open_path("van_x.so.1", NULL, &lib, err, sizeof(err)), -EINVAL);
}

static void test_not_loadable(void **state)
{
	char p[PATH_MAX + 32];
	FILE *f;
	(void)state;
	snprintf(p, sizeof(p), "%s/van_missing.so", tmpdir);
	assert_int_equal(psl__van_open_path(p, NULL, &lib, err, sizeof(err)), -ENOEXEC);
	assert_contains(err, p);
	assert_contains(err, "cannot be loaded");
	/* a text file with a van's name */
	snprintf(p, sizeof(p), "%s/van_junk.so", tmpdir);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs("this is not a shared object\n", f);
	fclose(f);
	assert_int_equal(psl__van_open_path(p, NULL, &lib, err, sizeof(err)), -ENOEXEC);
	assert_contains(err, p);
	assert_contains(err, "cannot be loaded");
	assert_null(lib.dl);
}

/* ---------------------------------------------------------- search path -- */

static void link_van(const char *dir, const char *as, const char *target)
{
	char p[PATH_MAX + 32];
	mkdir(dir, 0755);
	snprintf(p, sizeof(p), "%s/van_%s.so", dir, as);
	unlink(p);
	if (symlink(van_path(target), p) != 0)
		fail_msg("symlink %s: %s", p, strerror(errno));
}

static void test_open_by_name(void **state)
{
	char want[PATH_MAX + 32];
	struct stat st;
	(void)state;
	setenv("PS_VAN_PATH", TEST_VANDIR, 1);
	assert_int_equal(psl__van_open("good", &lib, err, sizeof(err)), 0);
	assert_string_equal(lib.path, van_path("good"));
	psl__van_close(&lib);

	/* a broken van found by name reports the same as by path */
	assert_int_equal(psl__van_open("abi2", &lib, err, sizeof(err)), -EPROTO);
	assert_contains(err, van_path("abi2"));
	assert_contains(err, "built for van ABI 2.0");

	assert_int_equal(psl__van_open("nosuchvan", &lib, err, sizeof(err)), -ENOENT);
	snprintf(want, sizeof(want), "%s/van_nosuchvan.so", TEST_VANDIR);
	assert_contains(err, "van 'nosuchvan' not found");
	assert_contains(err, want);
	assert_contains(err, PSL_VANDIR "/van_nosuchvan.so");
	assert_contains(err, "PS_VAN_PATH");
	assert_contains(err, "set PS_VAN_PATH to the folder that holds van_nosuchvan.so");
	assert_null(strchr(err, '\n'));

	/* van_ibverbs (DMLC_ENABLE_RDMA=1) is pslite's own: the message says it is
	 * not built or installed and why, not to set PS_VAN_PATH */
	if (stat(PSL_VANDIR "/van_ibverbs.so", &st) == 0) {
		/* installed on this machine: it would be found */
	} else {
		assert_int_equal(psl__van_open("ibverbs", &lib, err, sizeof(err)), -ENOENT);
		assert_contains(err, "van_ibverbs is not built or not installed here (configure "
				     "found no libibverbs/librdmacm, or it was built with "
				     "--enable-van-ibverbs=no): ");
		snprintf(want, sizeof(want), "%s/van_ibverbs.so", TEST_VANDIR);
		assert_contains(err, want);
		assert_contains(err, "DMLC_ENABLE_RDMA");
		assert_null(strstr(err, "PS_VAN_PATH"));
		assert_null(strchr(err, '\n'));
	}
}

static void test_search_order(void **state)
{
	char a[PATH_MAX + 8], b[PATH_MAX + 8], pa[PATH_MAX + 48], pb[PATH_MAX + 48], path[2 * PATH_MAX + 32];
	(void)state;
	snprintf(a, sizeof(a), "%s/a", tmpdir);
	snprintf(b, sizeof(b), "%s/b", tmpdir);
	snprintf(pa, sizeof(pa), "%s/van_good.so", a);
	snprintf(pb, sizeof(pb), "%s/van_good.so", b);
	link_van(a, "good", "good");
	link_van(b, "good", "good");

	snprintf(path, sizeof(path), "%s:%s", a, b);
	setenv("PS_VAN_PATH", path, 1);
	assert_int_equal(psl__van_open("good", &lib, err, sizeof(err)), 0);
	assert_string_equal(lib.path, pa);
	psl__van_close(&lib);

	snprintf(path, sizeof(path), "%s:%s", b, a);
	setenv("PS_VAN_PATH", path, 1);
	assert_int_equal(psl__van_open("good", &lib, err, sizeof(err)), 0);
	assert_string_equal(lib.path, pb);
	psl__van_close(&lib);

	/* not in the first folder: the second one's */
	unlink(pb);
	assert_int_equal(psl__van_open("good", &lib, err, sizeof(err)), 0);
	assert_string_equal(lib.path, pa);
	psl__van_close(&lib);

	/* the first one found is the one used: a broken van there is an error,
	 * not a silent fall-back to a later folder (in a third folder: a van
	 * stays loaded once loaded, so b's path is the good van's for good) */
	snprintf(b, sizeof(b), "%s/c", tmpdir);
	snprintf(pb, sizeof(pb), "%s/van_good.so", b);
	link_van(b, "good", "badname");
	snprintf(path, sizeof(path), "%s:%s", b, a);
	setenv("PS_VAN_PATH", path, 1);
	assert_int_equal(psl__van_open("good", &lib, err, sizeof(err)), -EPROTO);
	assert_contains(err, pb);
	assert_contains(err, "calls itself 'other', expected 'good'");
	assert_null(lib.ops);
}

static void test_dirs(void **state)
{
	char dirs[8][PATH_MAX];
	char exe[PATH_MAX];
	int n, i;
	(void)state;

	setenv("PS_VAN_PATH", "/x/one::/x/two:/x/one:", 1);
	n = psl__van_dirs(dirs, 8);
	assert_true(n >= 3);
	assert_string_equal(dirs[0], "/x/one");
	assert_string_equal(dirs[1], "/x/two"); /* empty entries and duplicates dropped */
	/* then pslite/ beside the object that holds the core (this program) */
	assert_true(n == 4);
	assert_non_null(realpath("/proc/self/exe", exe));
	{
		char *slash = strrchr(exe, '/');
		char got[PATH_MAX], want[PATH_MAX + 16];
		*slash = 0;
		snprintf(want, sizeof(want), "%s/pslite", exe);
		/* the entry may be relative (argv[0]); compare its parent */
		snprintf(got, sizeof(got), "%s", dirs[2]);
		assert_true(strlen(got) > 7 && !strcmp(got + strlen(got) - 7, "/pslite"));
		got[strlen(got) - 7] = 0;
		assert_non_null(realpath(got, want));
		assert_string_equal(want, exe);
	}
	assert_string_equal(dirs[3], PSL_VANDIR);

	/* max is respected */
	assert_int_equal(psl__van_dirs(dirs, 1), 1);
	assert_string_equal(dirs[0], "/x/one");

	unsetenv("PS_VAN_PATH");
	n = psl__van_dirs(dirs, 8);
	assert_int_equal(n, 2);
	assert_string_equal(dirs[n - 1], PSL_VANDIR);
	for (i = 0; i < n; i++)
		assert_string_not_equal(dirs[i], "");
}

/* pslite/ beside the object holding the core is searched when PS_VAN_PATH
 * does not have the van. */
static void test_beside_dir(void **state)
{
	char dirs[8][PATH_MAX], p[PATH_MAX + 32], got[PATH_MAX];
	int n, rc, created;
	(void)state;
	unsetenv("PS_VAN_PATH");
	n = psl__van_dirs(dirs, 8);
	assert_int_equal(n, 2);
	created = mkdir(dirs[0], 0755) == 0;
	snprintf(p, sizeof(p), "%s/van_good.so", dirs[0]);
	unlink(p);
	assert_int_equal(symlink(van_path("good"), p), 0);
	setenv("PS_VAN_PATH", tmpdir, 1); /* searched first, but has no van_good.so */
	rc = psl__van_open("good", &lib, err, sizeof(err));
	snprintf(got, sizeof(got), "%s", rc == 0 ? lib.path : err);
	unlink(p);
	if (created)
		rmdir(dirs[0]);
	if (rc)
		fail_msg("psl__van_open: %d: %s", rc, err);
	assert_string_equal(got, p);
}

/* ---------------------------------------------------- psl_van_probe -- */

struct probed {
	int n;
	char names[32][32];
	int status[32];
	char error[32][512];
	bool shadowed[32];
	uint64_t max_msg[32];
	char transports[32][64];
	char version[32][64];
};

static void probe_cb(const struct psl_van_info *info, void *arg)
{
	struct probed *p = arg;
	int i = p->n++;
	assert_true(i < 32);
	snprintf(p->names[i], sizeof(p->names[i]), "%s", info->name);
	p->status[i] = info->status;
	snprintf(p->error[i], sizeof(p->error[i]), "%s", info->error);
	p->shadowed[i] = info->shadowed;
	p->max_msg[i] = info->max_msg_size;
	snprintf(p->transports[i], sizeof(p->transports[i]), "%s", info->transports);
	snprintf(p->version[i], sizeof(p->version[i]), "%s", info->version);
}

static int probed_index(const struct probed *p, const char *name, bool shadowed)
{
	int i;
	for (i = 0; i < p->n; i++)
		if (!strcmp(p->names[i], name) && p->shadowed[i] == shadowed)
			return i;
	fail_msg("psl_van_probe did not report %s%s", name, shadowed ? " (shadowed)" : "");
	return -1;
}

static void test_probe(void **state)
{
	static struct probed p;
	char b[PATH_MAX + 8], path[2 * PATH_MAX + 16];
	int n, i;
	(void)state;
	memset(&p, 0, sizeof(p));
	snprintf(b, sizeof(b), "%s/b", tmpdir);
	link_van(b, "good", "good"); /* a second van_good.so, later on the path */
	snprintf(path, sizeof(path), "%s:%s", TEST_VANDIR, b);
	setenv("PS_VAN_PATH", path, 1);
	assert_int_equal(strncmp(psl_van_search_path(), path, strlen(path)), 0);
	n = psl_van_probe(probe_cb, &p);
	assert_int_equal(n, p.n);
	assert_true(n >= 10);
	i = probed_index(&p, "good", false);
	assert_int_equal(p.status[i], 0);
	assert_string_equal(p.error[i], "");
	assert_int_equal(p.max_msg[i], 12345);
	assert_string_equal(p.transports[i], "test transport");
	assert_string_equal(p.version[i], "testvan good 1.0");
	i = probed_index(&p, "good", true);
	assert_int_equal(p.status[i], 0);
	i = probed_index(&p, "abi2", false);
	assert_int_equal(p.status[i], -EPROTO);
	assert_contains(p.error[i], "built for van ABI 2.0");
	i = probed_index(&p, "v2only", false);
	assert_int_equal(p.status[i], -EPROTO);
	i = probed_index(&p, "noentry", false);
	assert_int_equal(p.status[i], -ENOEXEC);
	i = probed_index(&p, "badname", false);
	assert_int_equal(p.status[i], -EPROTO);
	assert_contains(p.error[i], "calls itself 'other'");
	i = probed_index(&p, "nosend", false);
	assert_int_equal(p.status[i], -EPROTO);
	i = probed_index(&p, "nodev", false);
	assert_int_equal(p.status[i], -ENODEV);
	assert_contains(p.error[i], "no device");
	i = probed_index(&p, "nullops", false);
	assert_int_equal(p.status[i], -ENOEXEC);
	assert_int_equal(psl_van_probe(NULL, NULL), -EINVAL);
}

/* --------------------------------------------------- through psl_start -- */

static void scheduler_env(const char *van)
{
	setenv("DMLC_ROLE", "scheduler", 1);
	setenv("DMLC_PS_ROOT_URI", "127.0.0.1", 1);
	setenv("DMLC_PS_ROOT_PORT", "9000", 1);
	setenv("DMLC_NUM_WORKER", "1", 1);
	setenv("DMLC_NUM_SERVER", "1", 1);
	setenv("DMLC_ENABLE_RDMA", van, 1);
	setenv("PS_START_TIMEOUT", "1", 1);
	setenv("PS_CONNECT_TIMEOUT", "1", 1);
	setenv("PS_VAN_PATH", TEST_VANDIR, 1);
	unsetenv("TESTVAN_BIND_RC");
	unsetenv("PS_VERBOSE");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* psl_start must fail with want within max_s, with exactly one ERROR line
 * that holds every needle. */
static void expect_start(int want, double max_s, ...)
{
	struct capture c;
	char *out;
	const char *needle;
	va_list ap;
	double t0 = now_s(), dt;
	int rc;

	capture_start(&c);
	rc = psl_start(0, true);
	dt = now_s() - t0;
	assert_int_equal(psl_finalize(0, true), 0); /* safe after a failed start */
	out = capture_end(&c);
	if (rc != want)
		fail_msg("psl_start returned %d (%s), expected %d", rc, psl_strerror(rc), want);
	if (dt > max_s)
		fail_msg("psl_start took %.1f s, expected at most %.1f", dt, max_s);
	assert_int_equal(count_lines_with(out, "ERROR"), 1);
	va_start(ap, max_s);
	while ((needle = va_arg(ap, const char *)))
		assert_contains(out, needle);
	va_end(ap);
	assert_null(psl_van_name());
	assert_int_equal(psl_my_id(), -1);
	free(out);
}

static void test_start_wrong_abi(void **state)
{
	(void)state;
	scheduler_env("abi2");
	expect_start(-EPROTO, 5, "DMLC_ENABLE_RDMA=abi2", van_path("abi2"),
		     "built for van ABI 2.0", NULL);
	scheduler_env("v2only");
	expect_start(-EPROTO, 5, "DMLC_ENABLE_RDMA=v2only", van_path("v2only"),
		     "psl_van_entry_v2", NULL);
}

static void test_start_missing_van(void **state)
{
	(void)state;
	scheduler_env("nosuchvan");
	expect_start(-ENOENT, 5, "DMLC_ENABLE_RDMA=nosuchvan", "van 'nosuchvan' not found",
		     TEST_VANDIR "/van_nosuchvan.so", NULL);
	unsetenv("DMLC_ENABLE_RDMA");
	setenv("DMLC_PS_VAN_TYPE", "nosuchvan", 1);
	expect_start(-ENOENT, 5, "DMLC_PS_VAN_TYPE=nosuchvan", NULL);
	unsetenv("DMLC_PS_VAN_TYPE");
}

static void test_start_broken_vans(void **state)
{
	(void)state;
	scheduler_env("noentry");
	expect_start(-ENOEXEC, 5, "DMLC_ENABLE_RDMA=noentry", "does not export", NULL);
	scheduler_env("badname");
	expect_start(-EPROTO, 5, "DMLC_ENABLE_RDMA=badname", "calls itself 'other'", NULL);
	scheduler_env("nosend");
	expect_start(-EPROTO, 5, "DMLC_ENABLE_RDMA=nosend", "missing mandatory operation send",
		     NULL);
}

static void test_start_nodev(void **state)
{
	(void)state;
	scheduler_env("nodev");
	expect_start(-ENODEV, 5, "DMLC_ENABLE_RDMA=nodev", "cannot run here (no device)",
		     "INFO", NULL);
}

static void test_start_port_in_use(void **state)
{
	(void)state;
	scheduler_env("good");
	setenv("TESTVAN_BIND_RC", "98", 1); /* EADDRINUSE */
	expect_start(-EADDRINUSE, 5, "DMLC_PS_ROOT_PORT=9000", "already in use", NULL);
	unsetenv("TESTVAN_BIND_RC");
}

static void test_start_timeout(void **state)
{
	(void)state;
	/* a scheduler nobody registers with gives up after PS_START_TIMEOUT */
	scheduler_env("good");
	expect_start(-ETIMEDOUT, 5, "PS_START_TIMEOUT", "0 of 1 servers", "0 of 1 workers",
		     NULL);
}

static void test_start_worker_send_fails(void **state)
{
	(void)state;
	/* the good test van cannot send: a worker says so instead of waiting */
	scheduler_env("good");
	setenv("DMLC_ROLE", "worker", 1);
	setenv("DMLC_NODE_HOST", "127.0.0.1", 1);
	expect_start(-EHOSTUNREACH, 5, "cannot contact the scheduler at 127.0.0.1:9000", NULL);
	unsetenv("DMLC_NODE_HOST");
}

static void test_start_bad_env(void **state)
{
	(void)state;
	scheduler_env("good");
	unsetenv("DMLC_ROLE");
	expect_start(-ENOENT, 5, "DMLC_ROLE is not set", NULL);
	scheduler_env("good");
	setenv("DMLC_NUM_SERVER", "0", 1);
	expect_start(-EINVAL, 5, "DMLC_NUM_SERVER=0: expected a positive integer", NULL);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_good),
		T(test_wrong_abi_major),
		T(test_entry_for_other_abi_only),
		T(test_no_entry),
		T(test_name_mismatch),
		T(test_missing_op),
		T(test_short_ops),
		T(test_null_ops),
		T(test_init_nodev),
		T(test_not_a_van_name),
		T(test_not_loadable),
		T(test_open_by_name),
		T(test_search_order),
		T(test_dirs),
		T(test_beside_dir),
		T(test_probe),
		T(test_start_wrong_abi),
		T(test_start_missing_van),
		T(test_start_broken_vans),
		T(test_start_nodev),
		T(test_start_port_in_use),
		T(test_start_timeout),
		T(test_start_worker_send_fails),
		T(test_start_bad_env),
	};
	return cmocka_run_group_tests_name("loader", tests, NULL, NULL);
}
