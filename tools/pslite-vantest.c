/*
 * pslite-vantest: does a van keep the promises of the van ABI
 * (include/pslite/van.h)? The van conformance suite, for any van: pslite's
 * own and third parties'.
 *
 *   pslite-vantest [OPTIONS] VAN [CASE-PATTERN...]
 *
 * VAN is a van's name (van_<name>.so, looked for like the core does: the
 * folders of PS_VAN_PATH, the pslite/ folder beside this program's lib/, the
 * configured van folder) or the path of a van_<name>.so. Every case runs in
 * a process of its own under a watchdog, and prints one line:
 * "PASS name", "FAIL name: why" or "SKIP name: why"; then a closing line
 * "N passed, N failed, N skipped". The exit status is 0 only when no case
 * failed. The van's own settings come from the environment, as in a job
 * (UCX_TLS=tcp pslite-vantest ucx). docs/writing-a-van.md says what each
 * case checks.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vantest/vt.h"

#ifndef PSL_VANDIR
#define PSL_VANDIR "/usr/local/lib/pslite"
#endif

struct vt_opts vt = {.timeout_s = 120, .strict = true};
const struct psl_van_ops *vt_ops;

/* ------------------------------------------------------------ loading -- */

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* VAN (a name or a path) -> vt.path and vt.name; -ENOENT with the folders
 * tried in err. */
static int find_van(const char *arg, char *err, size_t errlen)
{
	const char *b = base_name(arg);
	size_t bl = strlen(b);
	char dirs[8][PATH_MAX], tried[2048] = "";
	int n = 0, i;
	const char *env = getenv("PS_VAN_PATH");
	char exe[PATH_MAX];
	ssize_t el;

	if (strchr(arg, '/') || (bl > 3 && !strcmp(b + bl - 3, ".so"))) {
		if (bl < 8 || strncmp(b, "van_", 4) || strcmp(b + bl - 3, ".so")) {
			snprintf(err, errlen, "%s: expected a file named van_<name>.so", arg);
			return -EINVAL;
		}
		if (bl - 7 >= sizeof(vt.name)) {
			snprintf(err, errlen, "%s: the van's name is too long", arg);
			return -EINVAL;
		}
		snprintf(vt.name, sizeof(vt.name), "%.*s", (int)(bl - 7), b + 4);
		if (!realpath(arg, vt.path)) {
			snprintf(err, errlen, "%s: %s", arg, strerror(errno));
			return -ENOENT;
		}
		return 0;
	}
	if (strlen(arg) >= sizeof(vt.name)) {
		snprintf(err, errlen, "%s: the van's name is too long", arg);
		return -EINVAL;
	}
	snprintf(vt.name, sizeof(vt.name), "%s", arg);
	while (env && *env && n < 6) {
		size_t len = strcspn(env, ":");
		if (len && len < PATH_MAX)
			snprintf(dirs[n++], PATH_MAX, "%.*s", (int)len, env);
		env += len + (env[len] == ':');
	}
	el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (el > 0) {
		char *s;
		exe[el] = 0;
		if ((s = strrchr(exe, '/')) && (*s = 0, (s = strrchr(exe, '/')))) {
			*s = 0; /* <prefix>/bin/pslite-vantest -> <prefix>/lib/pslite */
			if (strlen(exe) + 12 < PATH_MAX)
				snprintf(dirs[n++], PATH_MAX, "%s/lib/pslite", exe);
		}
	}
	snprintf(dirs[n++], PATH_MAX, "%s", PSL_VANDIR);
	for (i = 0; i < n; i++) {
		struct stat st;
		size_t off = strlen(tried);
		if (snprintf(vt.path, sizeof(vt.path), "%s/van_%s.so", dirs[i], arg) >=
		    (int)sizeof(vt.path))
			continue;
		if (stat(vt.path, &st) == 0)
			return 0;
		snprintf(tried + off, sizeof(tried) - off, "%s%.1000s", off ? ", " : "", vt.path);
	}
	snprintf(err, errlen,
		 "van '%s' not found: looked for %s (set PS_VAN_PATH to the folder that holds "
		 "van_%s.so, or give its path)",
		 arg, tried, arg);
	return -ENOENT;
}

int vt_load(char *err, size_t errlen)
{
	void *dl;
	psl_van_entry_fn entry;

	dlerror();
	dl = dlopen(vt.path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s cannot be loaded: %s", vt.path, e ? e : "?");
		return -ENOEXEC;
	}
	*(void **)&entry = dlsym(dl, PSL_VAN_ENTRY_NAME);
	if (!entry) {
		snprintf(err, errlen, "%s does not export %s", vt.path, PSL_VAN_ENTRY_NAME);
		return -ENOEXEC;
	}
	vt_ops = entry(PSL_VAN_ABI_VERSION);
	if (!vt_ops) {
		snprintf(err, errlen, "%s(%#x) returned NULL", PSL_VAN_ENTRY_NAME,
			 PSL_VAN_ABI_VERSION);
		return -ENOEXEC;
	}
	/* dl stays open: a van's threads may outlive nothing, but its
	 * libraries' may (UCX keeps handlers) */
	return 0;
}

/* -------------------------------------------------------- one case -- */

/* In the case's process: runs it, writes why to fd 3, exits with its code. */
static int run_case_here(const char *name)
{
	char err[1024];
	int i, rc = VT_FAIL;
	for (i = 0; i < vt_ncases; i++)
		if (!strcmp(vt_cases[i].name, name))
			break;
	if (i == vt_ncases) {
		snprintf(vt_why, sizeof(vt_why), "no such case");
	} else if (strcmp(name, "load") && vt_load(err, sizeof(err))) {
		snprintf(vt_why, sizeof(vt_why), "%s", err);
	} else {
		rc = vt_cases[i].run();
		if (rc == VT_FAIL && !vt_why[0])
			snprintf(vt_why, sizeof(vt_why), "failed (no reason given)");
	}
	if (vt_why[0] && write(3, vt_why, strlen(vt_why)) < 0)
		perror("pslite-vantest");
	fflush(stdout);
	fflush(stderr);
	return rc;
}

/* Shows the last lines of the case's output (its van's log). */
static void show_tail(FILE *f, int lines)
{
	char *buf;
	long len, i;
	int nl = 0;
	fflush(f);
	len = ftell(f);
	if (len <= 0)
		return;
	buf = malloc((size_t)len + 1);
	if (!buf)
		return;
	rewind(f);
	len = (long)fread(buf, 1, (size_t)len, f);
	buf[len] = 0;
	for (i = len - 1; i > 0; i--)
		if (buf[i - 1] == '\n' && ++nl > lines)
			break;
	for (char *p = buf + i, *e; *p; p = e + (*e != 0)) {
		e = strchrnul(p, '\n');
		printf("    | %.*s\n", (int)(e - p), p);
	}
	free(buf);
}

/* In the runner: starts the case in a new process group, waits up to the
 * watchdog's limit. Returns VT_PASS/VT_FAIL/VT_SKIP, why in why. */
static int run_case(const char *name, char *why, size_t wl, FILE **out)
{
	int pfd[2], st = 0, rc;
	pid_t pid;
	int64_t end = vt_now_ms() + (int64_t)vt.timeout_s * 1000;
	FILE *log = NULL;
	ssize_t k;
	size_t got = 0;

	why[0] = 0;
	*out = NULL;
	if (!vt.verbose)
		log = tmpfile();
	if (pipe2(pfd, O_CLOEXEC)) {
		snprintf(why, wl, "pipe: %s", strerror(errno));
		return VT_FAIL;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		snprintf(why, wl, "fork: %s", strerror(errno));
		return VT_FAIL;
	}
	if (pid == 0) {
		char tmo[16];
		setpgid(0, 0);
		if (log) {
			dup2(fileno(log), 1);
			dup2(fileno(log), 2);
		}
		dup2(pfd[1], 3); /* after: the log may be fd 3 */
		snprintf(tmo, sizeof(tmo), "%d", vt.timeout_s);
		{
			char *args[40];
			int a = 0, i;
			args[a++] = (char *)vt.self;
			if (vt.verbose)
				args[a++] = "--verbose";
			if (!vt.strict)
				args[a++] = "--lenient";
			for (i = 0; i < vt.nbad; i++) {
				static char sets[8][512];
				snprintf(sets[i], sizeof(sets[i]), "%s=%s", vt.bad_name[i],
					 vt.bad_value[i]);
				args[a++] = "--bad-setting";
				args[a++] = sets[i];
			}
			args[a++] = "--run-case";
			args[a++] = (char *)name;
			args[a++] = vt.path;
			args[a] = NULL;
			execv(vt.self, args);
		}
		perror("pslite-vantest: exec");
		_exit(127);
	}
	setpgid(pid, pid);
	close(pfd[1]);
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (vt_now_ms() > end) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			snprintf(why, wl, "hung: no result after %d s (the case was killed)",
				 vt.timeout_s);
			close(pfd[0]);
			*out = log;
			return VT_FAIL;
		}
		vt_sleep_ms(5);
	}
	kill(-pid, SIGKILL); /* a peer process it started */
	while (got + 1 < wl && (k = read(pfd[0], why + got, wl - 1 - got)) > 0)
		got += (size_t)k;
	why[got] = 0;
	close(pfd[0]);
	*out = log;
	if (WIFSIGNALED(st)) {
		snprintf(why + got, wl - got, "%scrashed: %s", got ? "; " : "",
			 strsignal(WTERMSIG(st)));
		return VT_FAIL;
	}
	rc = WEXITSTATUS(st);
	if (rc == VT_PASS && why[0] == 0)
		return VT_PASS;
	if (rc == VT_SKIP)
		return VT_SKIP;
	if (!why[0])
		snprintf(why, wl, "exit status %d", rc);
	return VT_FAIL;
}

/* ------------------------------------------------------------- main -- */

static void usage(FILE *f)
{
	fprintf(f, "usage: pslite-vantest [OPTIONS] VAN [CASE-PATTERN...]\n"
		   "Checks that a van keeps the promises of the van ABI (pslite/van.h).\n"
		   "VAN: a van's name (found through PS_VAN_PATH and pslite's van folder)\n"
		   "or the path of a van_<name>.so. CASE-PATTERN: shell patterns of the\n"
		   "cases to run (default: all).\n"
		   "  --list                   list the cases and what each checks\n"
		   "  --verbose                show the van's log and each case's steps\n"
		   "  --timeout S              seconds a case may take (default 120)\n"
		   "  --exclude PATTERN        do not run the cases PATTERN matches (repeatable)\n"
		   "  --lenient                accept what van.h alone asks: sends to a lost\n"
		   "                           peer complete by fini, one to a node of another\n"
		   "                           van perhaps with 0 (the default, --strict: within\n"
		   "                           5 s of PSL_VAN_PEER_DOWN, with an error)\n"
		   "  --bad-setting NAME=VALUE a value of a setting the van reads that it\n"
		   "                           must refuse (case bad-setting; repeatable)\n"
		   "The van's own settings come from the environment, e.g.\n"
		   "  UCX_TLS=tcp pslite-vantest ucx\n"
		   "Exit status: 0 when no case failed, 1 when one did, 2 on bad usage.\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"list", no_argument, NULL, 'l'},
		{"verbose", no_argument, NULL, 'v'},
		{"timeout", required_argument, NULL, 't'},
		{"bad-setting", required_argument, NULL, 'b'},
		{"run-case", required_argument, NULL, 'r'},
		{"peer-child", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{"exclude", required_argument, NULL, 'x'},
		{"strict", no_argument, NULL, 's'},
		{"lenient", no_argument, NULL, 'L'},
		{NULL, 0, NULL, 0},
	};
	const char *run_one = NULL, *excl[16];
	int nexcl = 0;
	int peer_port = 0, c, i, j, npass = 0, nfail = 0, nskip = 0;
	bool list = false, loaded;
	char err[2048], self[PATH_MAX];
	ssize_t sl;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt_long(argc, argv, "+lvt:b:h", lo, NULL)) != -1) {
		switch (c) {
		case 'l':
			list = true;
			break;
		case 'v':
			vt.verbose = true;
			break;
		case 's':
			vt.strict = true;
			break;
		case 'L':
			vt.strict = false;
			break;
		case 't':
			vt.timeout_s = atoi(optarg);
			if (vt.timeout_s <= 0) {
				fprintf(stderr, "pslite-vantest: --timeout %s: expected seconds\n",
					optarg);
				return 2;
			}
			break;
		case 'b': {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || vt.nbad == 8) {
				fprintf(stderr,
					"pslite-vantest: --bad-setting %s: expected NAME=VALUE "
					"(at most 8)\n",
					optarg);
				return 2;
			}
			*eq = 0;
			vt.bad_name[vt.nbad] = optarg;
			vt.bad_value[vt.nbad++] = eq + 1;
			break;
		}
		case 'x':
			if (nexcl == 16) {
				fprintf(stderr, "pslite-vantest: at most 16 --exclude\n");
				return 2;
			}
			excl[nexcl++] = optarg;
			break;
		case 'r':
			run_one = optarg;
			break;
		case 'p':
			peer_port = atoi(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (list) {
		for (i = 0; i < vt_ncases; i++)
			printf("%-20s %s\n", vt_cases[i].name, vt_cases[i].what);
		return 0;
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (sl <= 0) {
		fprintf(stderr, "pslite-vantest: cannot find itself: %s\n", strerror(errno));
		return 2;
	}
	self[sl] = 0;
	vt.self = self;
	if (find_van(argv[optind], err, sizeof(err))) {
		fprintf(stderr, "pslite-vantest: %s\n", err);
		return 2;
	}
	if (run_one)
		return run_case_here(run_one);
	if (peer_port) {
		if (vt_load(err, sizeof(err))) {
			fprintf(stderr, "pslite-vantest: %s\n", err);
			return 1;
		}
		return vt_peer_child(peer_port);
	}
	for (i = optind + 1; i < argc; i++) {
		for (j = 0; j < vt_ncases; j++)
			if (!fnmatch(argv[i], vt_cases[j].name, 0))
				break;
		if (j == vt_ncases) {
			fprintf(stderr, "pslite-vantest: no case matches '%s' (see --list)\n",
				argv[i]);
			return 2;
		}
	}
	printf("pslite-vantest: van '%s' (%s)\n", vt.name, vt.path);
	loaded = true;
	for (i = 0; i < vt_ncases; i++) {
		const char *name = vt_cases[i].name;
		char why[1100];
		FILE *log = NULL;
		int rc;
		bool want = optind + 1 >= argc;
		for (j = optind + 1; j < argc && !want; j++)
			want = !fnmatch(argv[j], name, 0);
		if (!want)
			continue;
		for (j = 0; j < nexcl; j++)
			if (!fnmatch(excl[j], name, 0))
				break;
		if (j < nexcl) {
			printf("SKIP %s: excluded (--exclude %s)\n", name, excl[j]);
			nskip++;
			continue;
		}
		if (!loaded && strcmp(name, "load")) {
			printf("SKIP %s: the van did not load\n", name);
			nskip++;
			continue;
		}
		rc = run_case(name, why, sizeof(why), &log);
		if (rc == VT_PASS) {
			printf("PASS %s\n", name);
			npass++;
		} else if (rc == VT_SKIP) {
			printf("SKIP %s: %s\n", name, why[0] ? why : "skipped");
			nskip++;
		} else {
			printf("FAIL %s: %s\n", name, why);
			nfail++;
			if (log)
				show_tail(log, 20);
			if (!strcmp(name, "load"))
				loaded = false;
		}
		if (log)
			fclose(log);
	}
	printf("%d passed, %d failed, %d skipped\n", npass, nfail, nskip);
	return nfail ? 1 : 0;
}
