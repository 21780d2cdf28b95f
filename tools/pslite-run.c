/*
 * pslite-run: start a whole job, on this machine or across machines.
 *
 *   pslite-run -s S -w W [--van NAME] [--port P] [--host H] [--timeout SEC]
 *              [--verbose N] [--keep-going] [--restart N] -- COMMAND [ARGS...]
 *
 * Starts one scheduler, S servers and W workers, each running COMMAND with
 * the ps-lite environment of its role (DMLC_ROLE, DMLC_PS_ROOT_URI,
 * DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER, DMLC_NUM_WORKER, DMLC_NODE_HOST,
 * DMLC_RANK, and DMLC_ENABLE_RDMA for --van). Every output line is prefixed
 * with the role and rank. With DMLC_GROUP_SIZE=G in the environment, S and W
 * count groups: S x G server and W x G worker processes, one per instance,
 * DMLC_RANK each instance's rank, PS_GROUP_IN_PROCESS=0. The first process to fail decides the exit code and
 * the others are ended (an exit with 3, the job lost a node, waits 2 s for
 * its cause to fail first) (with --keep-going they run on, and the first failure
 * is still the exit code); with --timeout, everything is ended after SEC
 * seconds and the exit code is 124. With --restart N, a server or worker
 * that fails is started again (up to N times each) with the same role and
 * DMLC_RANK, and takes its own place in the job (PS_RECOVERY=1 for every
 * node, docs/recovery.md).
 *
 * Across machines (docs/launch.md):
 *   --hostfile FILE   the same, each process started over ssh on a host of
 *                     FILE (launch.h: psl_hostfile_read, psl_hostfile_place)
 *   --slurm, --mpi, --k8s
 *                     one task of a job that srun, mpirun or Kubernetes
 *                     started: its role and rank come from the launcher's
 *                     variables (psl_launch_map), then COMMAND replaces
 *                     pslite-run
 */
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blame.h"
#include "freeport.h"
#include "launch.h"
#include "shm_clean.h"

extern char **environ;

#define DEFAULT_PORT 9091 /* the scheduler's port across machines */

struct child {
	pid_t pid;
	char label[300];
	const char *host; /* --hostfile: the host it runs on */
	int fd[2];        /* stdout, stderr pipes */
	int in;           /* --hostfile: ssh's stdin; closing it ends the remote process */
	char buf[2][4096];
	size_t len[2];
	bool running;
	int status;
	int role;     /* PSL_LAUNCH_* */
	long rank;
	int restarts; /* --restart: how many times this node was started again */
};

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
	g_signal = sig;
}

static const char usage_text[] =
	"usage: pslite-run -s SERVERS -w WORKERS [--joint N] [--van NAME] [--port PORT]\n"
	"                  [--host HOST]\n"
	"                  [--timeout SECONDS] [--verbose N] [--keep-going] [--restart N]\n"
	"                  [--hostfile FILE [--ssh-opts OPTS] [-x NAME[=VALUE]]...]\n"
	"                  -- COMMAND [ARGS...]\n"
	"       pslite-run --slurm|--mpi|--k8s [-s SERVERS | --servers-per-node N]\n"
	"                  [--scheduler HOST] [--port PORT] [--world N] [--van NAME]\n"
	"                  [--dry-run] -- COMMAND [ARGS...]\n"
	"Starts a scheduler, SERVERS servers and WORKERS workers on this machine (or\n"
	"over ssh on the hosts of FILE), each running COMMAND with the ps-lite\n"
	"environment of its role; with --slurm, --mpi or --k8s, runs COMMAND as the\n"
	"role of this task of a job that srun, mpirun or Kubernetes started.\n";

static const char options_text[] =
	"Options (pslite-run --help):\n"
	"  -s N, -w N        servers and workers (DMLC_NUM_SERVER, DMLC_NUM_WORKER);\n"
	"                    required unless --joint; with a launcher -s defaults to\n"
	"                    (tasks-1)/2\n"
	"  --joint N, -j N   N processes more with DMLC_ROLE=joint, each a server and a\n"
	"                    worker (one machine, no instance groups); default 0\n"
	"  --van NAME        DMLC_ENABLE_RDMA for every node (zmq, ucx, fabric,\n"
	"                    ibverbs, ...); default: the environment's, else zmq\n"
	"  --port PORT       the scheduler's port (DMLC_PS_ROOT_PORT); default: a free\n"
	"                    port on this machine, DMLC_PS_ROOT_PORT or 9091 with\n"
	"                    --hostfile and --mpi/--k8s, a port from the job id with\n"
	"                    --slurm\n"
	"  --host HOST       the address the nodes use on this machine; default\n"
	"                    127.0.0.1\n"
	"  --timeout S       end the whole job after S seconds (exit 124); default:\n"
	"                    no limit\n"
	"  --verbose N       PS_VERBOSE for every node (1 set-up, 2 every message);\n"
	"                    default: the environment's\n"
	"  --keep-going      when a node fails, let the others go on; default: end\n"
	"                    them\n"
	"  --restart N       start a server or worker that failed again, up to N times\n"
	"                    each, in its own place (PS_RECOVERY=1, docs/recovery.md);\n"
	"                    on this machine only; default 0\n"
	"  --hostfile FILE   start the nodes over ssh on the hosts of FILE (one per\n"
	"                    line, optional slots=N); default: all on this machine\n"
	"  --ssh-opts OPTS   more ssh options (also PSLITE_SSH_OPTS); default none\n"
	"  -x NAME[=VALUE]   pass NAME (this environment's value, or VALUE) to the\n"
	"                    remote nodes; repeatable\n"
	"  --slurm, --mpi, --k8s  be the task of a job the launcher started\n"
	"  --servers-per-node N   with a launcher: N servers on every machine instead\n"
	"                    of -s; default off\n"
	"  --scheduler HOST  with a launcher: the scheduler's host; default: the\n"
	"                    first node (Slurm), DMLC_PS_ROOT_URI, this host (one\n"
	"                    machine)\n"
	"  --world N         with --mpi/--k8s: the task count when the launcher does\n"
	"                    not say it (PSLITE_WORLD_SIZE)\n"
	"  --dry-run         print where each role would run, start nothing\n"
	"See docs/launch.md.\n";

static int usage(void)
{
	fprintf(stderr, "%s--help explains every option and its default. See docs/launch.md.\n",
		usage_text);
	return 2;
}

/* pslite-run --help: the usage and every option with its default. */
static int help(void)
{
	printf("%s%s", usage_text, options_text);
	return 0;
}

static long parse_pos(const char *opt, const char *v, long max)
{
	char *end;
	long x;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || *end || x < 1 || x > max) {
		fprintf(stderr, "pslite-run: %s %s: expected an integer from 1 to %ld\n", opt, v, max);
		exit(2);
	}
	return x;
}

/* The first count mismatch a child logged (blame.h), kept so that the
 * job's last line names the misconfigured node, not the first to exit. */
static struct {
	bool have;
	struct psl_blame b;
	char label[300];
} g_blame;

static void note_line(const struct child *c, const char *line, size_t n)
{
	char l[4096];
	struct psl_blame b;
	snprintf(l, sizeof(l), "%.*s", (int)n, line);
	/* the refused node's own line names it by its label: it wins */
	if (!psl_blame_parse(l, &b) || (g_blame.have && (g_blame.b.own || !b.own)))
		return;
	g_blame.b = b;
	snprintf(g_blame.label, sizeof(g_blame.label), "%s", c->label);
	g_blame.have = true;
}

/* The job failed: if a node was refused for its counts, the last line says
 * which node has a value other than the one pslite-run set. */
static void report_blame(long Sg, long Wg, long G)
{
	char why[600];
	const char *v = g_blame.b.var;
	if (!g_blame.have)
		return;
	psl_blame_judge(&g_blame.b,
			!strcmp(v, "DMLC_NUM_SERVER")   ? Sg
			: !strcmp(v, "DMLC_NUM_WORKER") ? Wg
							: G,
			g_blame.label, why, sizeof(why));
	fprintf(stderr, "pslite-run: %s\n", why);
}

static void flush_line(struct child *c, int k, bool all)
{
	char *nl;
	FILE *out = k == 0 ? stdout : stderr;
	while ((nl = memchr(c->buf[k], '\n', c->len[k])) || (all && c->len[k])) {
		size_t n = nl ? (size_t)(nl - c->buf[k]) + 1 : c->len[k];
		note_line(c, c->buf[k], nl ? n - 1 : n);
		fprintf(out, "[%s] %.*s%s", c->label, (int)n, c->buf[k], nl ? "" : "\n");
		memmove(c->buf[k], c->buf[k] + n, c->len[k] - n);
		c->len[k] -= n;
	}
	fflush(out);
}

static void read_child(struct child *c, int k)
{
	ssize_t n;
	if (c->fd[k] < 0)
		return;
	if (c->len[k] == sizeof(c->buf[k])) { /* a very long line: cut it */
		fprintf(k == 0 ? stdout : stderr, "[%s] %.*s\n", c->label, (int)c->len[k],
			c->buf[k]);
		c->len[k] = 0;
	}
	n = read(c->fd[k], c->buf[k] + c->len[k], sizeof(c->buf[k]) - c->len[k]);
	if (n > 0) {
		c->len[k] += (size_t)n;
		flush_line(c, k, false);
	} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
		flush_line(c, k, true);
		close(c->fd[k]);
		c->fd[k] = -1;
	}
}

/* Starts c (its role and rank set): COMMAND cmd with its role's variables,
 * or, over ssh, sv (in: the pipe that becomes ssh's stdin). 0, or -1 (said). */
static int start_child(struct child *c, char **sv, int in[2], bool joint, char **cmd)
{
	int out[2], err2[2];
	char num[32];

	c->in = -1;
	if (pipe2(out, O_CLOEXEC) || pipe2(err2, O_CLOEXEC)) {
		perror("pslite-run: pipe");
		return -1;
	}
	c->pid = fork();
	if (c->pid < 0) {
		perror("pslite-run: fork");
		return -1;
	}
	if (c->pid == 0) {
		dup2(out[1], 1);
		dup2(err2[1], 2);
		if (sv) {
			/* a group of its own: Ctrl-C reaches pslite-run only,
			 * which ends the remote processes through stdin */
			setpgid(0, 0);
			dup2(in[0], 0);
			execvp(sv[0], sv);
			fprintf(stderr, "pslite-run: cannot run %s: %s\n", sv[0], strerror(errno));
			_exit(255);
		}
		setenv("DMLC_ROLE", psl_launch_role_name(c->role), 1);
		if (joint) /* a joint process has two ranks: every rank the scheduler's choice */
			unsetenv("DMLC_RANK");
		else if (c->role != PSL_LAUNCH_SCHEDULER) {
			snprintf(num, sizeof(num), "%ld", c->rank);
			setenv("DMLC_RANK", num, 1);
		}
		execvp(cmd[0], cmd);
		fprintf(stderr, "pslite-run: cannot run %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	if (in[0] >= 0) {
		close(in[0]);
		c->in = in[1];
	}
	close(out[1]);
	close(err2[1]);
	c->fd[0] = out[0];
	c->fd[1] = err2[0];
	c->running = true;
	return 0;
}

/* --restart: starts node i (which failed) again in a new slot of *ch (its
 * output keeps its label); true if it did. */
static bool restart_child(struct child **ch, int *n, struct pollfd **pfd, int i, int max,
			  char **cmd)
{
	struct child *grown, *c;
	struct pollfd *p;
	int none[2] = {-1, -1};

	if ((*ch)[i].role == PSL_LAUNCH_SCHEDULER || (*ch)[i].restarts >= max)
		return false;
	grown = realloc(*ch, sizeof(**ch) * (size_t)(*n + 1));
	if (!grown)
		return false;
	*ch = grown;
	p = realloc(*pfd, sizeof(**pfd) * (2 * (size_t)(*n + 1) + 1));
	if (!p)
		return false;
	*pfd = p;
	c = &grown[*n];
	memset(c, 0, sizeof(*c));
	memcpy(c->label, grown[i].label, sizeof(c->label));
	c->role = grown[i].role;
	c->rank = grown[i].rank;
	c->restarts = grown[i].restarts + 1;
	if (start_child(c, NULL, none, false, cmd))
		return false;
	fprintf(stderr, "pslite-run: %s started again (%d of --restart %d): it takes its own "
			"place in the job\n",
		c->label, c->restarts, max);
	(*n)++;
	return true;
}

/* Ends the children: a local one gets sig; an ssh one first loses its stdin
 * (the remote wrapper then ends the remote process and ssh returns), and
 * gets sig only when hard (the remote side did not end in time). */
static void kill_all(struct child *ch, int n, int sig, bool hard)
{
	int i;
	for (i = 0; i < n; i++) {
		if (ch[i].in >= 0) {
			close(ch[i].in);
			ch[i].in = -1;
		}
		if (ch[i].running && (!ch[i].host || hard))
			kill(ch[i].pid, sig);
	}
}

/* ------------------------------------------------------------ over ssh -- */

struct sshcfg {
	char **opts; /* the user's ssh options, then ours */
	int nopts, nuser;
	const char *ssh; /* PSLITE_SSH or "ssh" */
};

/* Splits the user's ssh options (PSLITE_SSH_OPTS, then --ssh-opts) on
 * blanks, then adds BatchMode and ConnectTimeout (ssh keeps the first value
 * of an option, so the user's win). */
static int ssh_setup(struct sshcfg *c, const char *env_opts, const char *arg_opts)
{
	const char *srcs[2] = {env_opts, arg_opts};
	int k;
	c->ssh = getenv("PSLITE_SSH") && *getenv("PSLITE_SSH") ? getenv("PSLITE_SSH") : "ssh";
	c->opts = calloc(512, sizeof(char *));
	if (!c->opts)
		return -1;
	c->nopts = 0;
	for (k = 0; k < 2; k++) {
		char *dup, *save = NULL, *tok;
		if (!srcs[k])
			continue;
		dup = strdup(srcs[k]);
		if (!dup)
			return -1;
		for (tok = strtok_r(dup, " \t\n", &save); tok && c->nopts < 500;
		     tok = strtok_r(NULL, " \t\n", &save))
			c->opts[c->nopts++] = strdup(tok);
		free(dup);
	}
	c->nuser = c->nopts;
	c->opts[c->nopts++] = "-o";
	c->opts[c->nopts++] = "BatchMode=yes";
	c->opts[c->nopts++] = "-o";
	c->opts[c->nopts++] = "ConnectTimeout=10";
	return 0;
}

static void ssh_free(struct sshcfg *c)
{
	int i;
	for (i = 0; c->opts && i < c->nuser; i++)
		free(c->opts[i]);
	free(c->opts);
}

/* argv for: ssh OPTS -- HOST SCRIPT (freed by the caller, not its strings) */
static char **ssh_argv(const struct sshcfg *c, const char *host, const char *script)
{
	char **v = calloc((size_t)c->nopts + 5, sizeof(char *));
	int i, k = 0;
	if (!v)
		return NULL;
	v[k++] = (char *)c->ssh;
	for (i = 0; i < c->nopts; i++)
		v[k++] = c->opts[i];
	v[k++] = "--";
	v[k++] = (char *)host;
	v[k++] = (char *)script;
	return v;
}

static bool is_ipv4(const char *s)
{
	struct in_addr a;
	return inet_pton(AF_INET, s, &a) == 1;
}

/* The address a host's processes are reached at: addr=, else its name
 * without ssh's "user@". */
static const char *host_addr(const struct psl_host *h)
{
	const char *at = strrchr(h->name, '@');
	return *h->addr ? h->addr : at ? at + 1 : h->name;
}

/* Builds the remote command of one process: the passed environment, its
 * role's, and a wrapper that ends the process when ssh's stdin closes
 * (pslite-run ended it, or died). */
static char *remote_script(const struct psl_host *h, int role, long rank, char **xvars, int nx,
			   char **cmd)
{
	size_t cap = 1 << 16;
	char *s = calloc(1, cap), cwd[4096], kv[600], **e;
	int i;
	if (!s)
		return NULL;
	strcpy(s, "cd");
	if (!getcwd(cwd, sizeof(cwd)))
		strcpy(cwd, "/");
	if (psl_shell_quote(s, cap, cwd))
		goto big;
	strcat(s, " 2>/dev/null; exec 3<&0; env");
	for (e = environ; *e; e++) {
		if (!psl_launch_env_passed(*e) || !strncmp(*e, "DMLC_NODE_HOST=", 15) ||
		    !strncmp(*e, "DMLC_INTERFACE=", 15) || !strncmp(*e, "DMLC_PORT=", 10) ||
		    !strncmp(*e, "DMLC_ROLE=", 10) || !strncmp(*e, "DMLC_RANK=", 10))
			continue;
		if (psl_shell_quote(s, cap, *e))
			goto big;
	}
	for (i = 0; i < nx; i++) {
		const char *v = strchr(xvars[i], '=') ? NULL : getenv(xvars[i]);
		char *nv = NULL;
		int bad;
		if (!v && !strchr(xvars[i], '='))
			continue; /* -x NAME that the launcher does not have */
		if (v && asprintf(&nv, "%s=%s", xvars[i], v) < 0)
			goto big;
		bad = psl_shell_quote(s, cap, nv ? nv : xvars[i]);
		free(nv);
		if (bad)
			goto big;
	}
	snprintf(kv, sizeof(kv), "DMLC_ROLE=%s", psl_launch_role_name(role));
	if (psl_shell_quote(s, cap, kv))
		goto big;
	if (role != PSL_LAUNCH_SCHEDULER) {
		snprintf(kv, sizeof(kv), "DMLC_RANK=%ld", rank);
		if (psl_shell_quote(s, cap, kv))
			goto big;
	}
	if (*h->addr || (!*h->iface && is_ipv4(host_addr(h))))
		snprintf(kv, sizeof(kv), "DMLC_NODE_HOST=%s", host_addr(h));
	else
		snprintf(kv, sizeof(kv), "DMLC_INTERFACE=%s",
			 *h->iface ? h->iface
			 : getenv("DMLC_INTERFACE") && *getenv("DMLC_INTERFACE")
			     ? getenv("DMLC_INTERFACE")
			     : "auto");
	if (psl_shell_quote(s, cap, kv))
		goto big;
	for (i = 0; cmd[i]; i++)
		if (psl_shell_quote(s, cap, cmd[i]))
			goto big;
	if (strlen(s) + 300 >= cap)
		goto big;
	/* the watcher: on EOF, TERM, then KILL after 5 s (its sleeps are short:
	 * none outlives it by more than 0.1 s) */
	strcat(s, " </dev/null & p=$!; (while read -r _ <&3; do :; done; kill -TERM $p "
		  "2>/dev/null; i=0; while [ $i -lt 50 ] && kill -0 $p 2>/dev/null; do sleep 0.1; "
		  "i=$((i+1)); done; kill -KILL $p 2>/dev/null) & w=$!; wait $p; rc=$?; "
		  "kill $w 2>/dev/null; exit $rc");
	return s;
big:
	free(s);
	fprintf(stderr, "pslite-run: the command and its environment are too long for ssh "
			"(64 KiB); pass fewer variables\n");
	return NULL;
}

/* Runs PROBE on every host at once, before anything starts: a host that
 * ssh cannot reach, or that lacks the command, is one line and exit 2. */
static int ssh_preflight(const struct sshcfg *c, struct psl_host *hosts, size_t nh, const char *cmd)
{
	size_t i;
	int bad = 0;
	pid_t *pids = calloc(nh, sizeof(pid_t));
	int *fds = calloc(nh, sizeof(int));
	char *probe = calloc(1, 8192);
	if (!pids || !fds || !probe)
		return 2;
	strcpy(probe, "command -v");
	psl_shell_quote(probe, 8000, cmd);
	strcat(probe, " >/dev/null || { echo \"no command");
	psl_shell_quote(probe, 8000, cmd);
	strcat(probe, " there (the same path must exist on every host)\" >&2; exit 127; }");
	for (i = 0; i < nh; i++) {
		int p[2];
		char **v;
		pids[i] = -1;
		fds[i] = -1;
		if (!hosts[i].used || pipe2(p, O_CLOEXEC))
			continue;
		v = ssh_argv(c, hosts[i].name, probe);
		pids[i] = fork();
		if (pids[i] == 0) {
			int null = open("/dev/null", O_RDONLY);
			dup2(null, 0);
			dup2(p[1], 1);
			dup2(p[1], 2);
			execvp(v[0], v);
			fprintf(stderr, "cannot run %s: %s\n", v[0], strerror(errno));
			_exit(255);
		}
		free(v);
		close(p[1]);
		fds[i] = p[0];
	}
	for (i = 0; i < nh; i++) {
		char out[4096], *last, *nl;
		ssize_t n, len = 0;
		int status = 0;
		if (pids[i] <= 0)
			continue;
		while (len < (ssize_t)sizeof(out) - 1 &&
		       (n = read(fds[i], out + len, sizeof(out) - 1 - (size_t)len)) > 0)
			len += n;
		close(fds[i]);
		out[len] = 0;
		waitpid(pids[i], &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r'))
			out[--len] = 0;
		last = out;
		while ((nl = strchr(last, '\n')) && nl[1])
			last = nl + 1;
		if (!bad)
			fprintf(stderr,
				"pslite-run: host %s: %s (ssh exited %d); check the host file, "
				"--ssh-opts or PSLITE_SSH_OPTS; nothing was started\n",
				hosts[i].name, *last ? last : "cannot be reached over ssh",
				WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
		bad = 1;
	}
	free(pids);
	free(fds);
	free(probe);
	return bad ? 2 : 0;
}

/* ----------------------------------------- --slurm, --mpi, --k8s tasks -- */

static const char *env1(const char *const *names, const char **which)
{
	for (; *names; names++) {
		const char *v = getenv(*names);
		if (v && *v) {
			if (which)
				*which = *names;
			return v;
		}
	}
	return NULL;
}

static int env_long(const char *mode, const char *name, const char *v, long min, long *out)
{
	char *end;
	errno = 0;
	*out = strtol(v, &end, 10);
	if (errno || end == v || *end || *out < min) {
		fprintf(stderr, "pslite-run %s: %s=%s: expected an integer of at least %ld\n", mode,
			name, v, min);
		return -1;
	}
	return 0;
}

struct taskopts {
	const char *mode; /* "--slurm", "--mpi", "--k8s" */
	long servers, servers_per_node, world;
	const char *scheduler, *van, *verbose;
	int port;
	bool dry_run;
};

/* Sets this task's environment from its place and execs cmd. With
 * DMLC_GROUP_SIZE=G > 1 (every task is one instance), the servers and
 * workers counted are instances: DMLC_NUM_SERVER and DMLC_NUM_WORKER get
 * the groups, DMLC_RANK the instance's rank. */
static int run_task(const struct taskopts *o, const struct psl_launch_place *pl,
		    const char *sched, int port, char **cmd)
{
	char num[32];
	const char *gs = getenv("DMLC_GROUP_SIZE");
	long G = 1, ns = pl->nserver, nw = pl->nworker;
	if (gs && *gs) {
		char *end;
		G = strtol(gs, &end, 10);
		if (*end || G < 1 || G > 16000) {
			fprintf(stderr, "pslite-run %s: DMLC_GROUP_SIZE=%s: expected 1 to 16000\n",
				o->mode, gs);
			return 2;
		}
		if (ns % G || nw % G) {
			fprintf(stderr,
				"pslite-run %s: DMLC_GROUP_SIZE=%ld: the job's %ld server and %ld "
				"worker tasks are instances and must be whole groups: start a "
				"multiple of %ld of each (-s, and the task count)\n",
				o->mode, G, ns, nw, G);
			return 2;
		}
		ns /= G;
		nw /= G;
		if (G > 1) /* (ps-lite's C++ StartPS would start the whole group) */
			setenv("PS_GROUP_IN_PROCESS", "0", 1);
	}
	setenv("DMLC_ROLE", psl_launch_role_name(pl->role), 1);
	setenv("DMLC_PS_ROOT_URI", sched, 1);
	snprintf(num, sizeof(num), "%d", port);
	setenv("DMLC_PS_ROOT_PORT", num, 1);
	snprintf(num, sizeof(num), "%ld", ns);
	setenv("DMLC_NUM_SERVER", num, 1);
	snprintf(num, sizeof(num), "%ld", nw);
	setenv("DMLC_NUM_WORKER", num, 1);
	if (pl->role != PSL_LAUNCH_SCHEDULER) {
		snprintf(num, sizeof(num), "%ld", pl->rank);
		setenv("DMLC_RANK", num, 1);
		if (!(getenv("DMLC_NODE_HOST") && *getenv("DMLC_NODE_HOST")) &&
		    !(getenv("DMLC_INTERFACE") && *getenv("DMLC_INTERFACE")))
			setenv("DMLC_INTERFACE", "auto", 1);
	} else {
		unsetenv("DMLC_RANK");
	}
	if (o->van)
		setenv("DMLC_ENABLE_RDMA", o->van, 1);
	if (o->verbose)
		setenv("PS_VERBOSE", o->verbose, 1);
	if (o->dry_run) {
		static const char *const show[] = {
			"DMLC_ROLE",	   "DMLC_RANK",	      "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT",
			"DMLC_NUM_SERVER", "DMLC_NUM_WORKER", "DMLC_NODE_HOST",	  "DMLC_INTERFACE",
			"DMLC_ENABLE_RDMA", NULL};
		int i;
		for (i = 0; show[i]; i++)
			if (getenv(show[i]))
				printf("%s=%s\n", show[i], getenv(show[i]));
		return 0;
	}
	fflush(stdout);
	execvp(cmd[0], cmd);
	fprintf(stderr, "pslite-run %s: cannot run %s: %s\n", o->mode, cmd[0], strerror(errno));
	return 127;
}

static int slurm_task(struct taskopts *o, char **cmd)
{
	static const char *const procid_n[] = {"SLURM_PROCID", NULL};
	static const char *const ntasks_n[] = {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", NULL};
	static const char *const nodes_n[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
					      "SLURM_NODELIST", NULL};
	static const char *const tpn_n[] = {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
					    NULL};
	const char *v, *nodes, *nodes_var = NULL, *tpn, *tpn_var = NULL, *ntasks_var = NULL;
	char err[512], **hosts = NULL, sched[256];
	size_t nh = 0;
	long *counts = NULL, ncounts = 0, sum = 0, i, port = o->port;
	struct psl_launch_job job = {0};
	struct psl_launch_place pl;
	int rc;

	if (!(v = env1(procid_n, NULL))) {
		fprintf(stderr, "pslite-run --slurm: SLURM_PROCID is not set: start it with srun "
				"inside an allocation (salloc, sbatch)\n");
		return 2;
	}
	if (env_long("--slurm", "SLURM_PROCID", v, 0, &job.task))
		return 2;
	if (!(v = env1(ntasks_n, &ntasks_var))) {
		fprintf(stderr, "pslite-run --slurm: SLURM_NTASKS is not set: start it with srun "
				"-n TASKS\n");
		return 2;
	}
	if (env_long("--slurm", ntasks_var, v, 1, &job.ntasks))
		return 2;
	if (!(nodes = env1(nodes_n, &nodes_var)) && !o->scheduler) {
		fprintf(stderr, "pslite-run --slurm: SLURM_JOB_NODELIST is not set: start it with "
				"srun, or pass --scheduler HOST\n");
		return 2;
	}
	if (nodes && psl_hostlist_expand(nodes, &hosts, &nh, err, sizeof(err))) {
		fprintf(stderr, "pslite-run --slurm: %s: %s\n", nodes_var, err);
		return 2;
	}
	tpn = env1(tpn_n, &tpn_var);
	if (tpn && psl_tasks_per_node(tpn, &counts, &ncounts, err, sizeof(err))) {
		fprintf(stderr, "pslite-run --slurm: %s: %s\n", tpn_var, err);
		rc = 2;
		goto out;
	}
	for (i = 0; i < ncounts; i++)
		sum += counts[i];
	if (counts && (sum != job.ntasks || (nodes && (size_t)ncounts != nh))) {
		fprintf(stderr,
			"pslite-run --slurm: inconsistent Slurm variables: %s=%s (%ld tasks on %ld "
			"nodes), %s=%ld, %s names %zu nodes\n",
			tpn_var, tpn, sum, ncounts, ntasks_var, job.ntasks,
			nodes ? nodes_var : "no node list", nh);
		rc = 2;
		goto out;
	}
	if (o->servers_per_node > 0) {
		/* per-node placement needs Slurm's block distribution */
		const char *nid = getenv("SLURM_NODEID"), *lid = getenv("SLURM_LOCALID");
		long base = 0, node = 0;
		if (!counts) {
			fprintf(stderr, "pslite-run --slurm: --servers-per-node needs "
					"SLURM_STEP_TASKS_PER_NODE: start it with srun\n");
			rc = 2;
			goto out;
		}
		while (node < ncounts && job.task >= base + counts[node])
			base += counts[node++];
		if (nid && lid && (atol(nid) != node || atol(lid) != job.task - base)) {
			fprintf(stderr,
				"pslite-run --slurm: task %ld is task %s of node %s, not %ld of node "
				"%ld: --servers-per-node needs block distribution (srun -m block)\n",
				job.task, lid, nid, job.task - base, node);
			rc = 2;
			goto out;
		}
		job.per_node = counts;
		job.nnodes = ncounts;
	}
	job.servers = o->servers;
	job.servers_per_node = o->servers_per_node;
	if (psl_launch_map(&job, &pl, err, sizeof(err))) {
		fprintf(stderr, "pslite-run --slurm: %s\n", err);
		rc = 2;
		goto out;
	}
	snprintf(sched, sizeof(sched), "%s", o->scheduler ? o->scheduler : hosts[0]);
	if (!port) {
		/* the same port in every task of the step, different for other
		 * steps and jobs: SLURM_JOB_ID and SLURM_STEP_ID */
		const char *jid = getenv("SLURM_JOB_ID"), *sid = getenv("SLURM_STEP_ID");
		unsigned long j = jid ? strtoul(jid, NULL, 10) : 0, s = sid ? strtoul(sid, NULL, 10) : 0;
		port = 20000 + (long)((j * 8 + s) % 10000);
	}
	rc = run_task(o, &pl, sched, (int)port, cmd);
out:
	psl_hostlist_free(hosts, nh);
	free(counts);
	return rc;
}

static int mpi_task(struct taskopts *o, char **cmd)
{
	static const char *const rank_n[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL};
	static const char *const size_n[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
	static const char *const lsize_n[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
					      NULL};
	static const char *const lrank_n[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
					      NULL};
	const char *v, *rank_var = NULL, *size_var = NULL, *ls_var = NULL, *lr_var = NULL;
	char err[512];
	long lsize = 0, lrank = -1, *counts = NULL, i;
	struct psl_launch_job job = {0};
	struct psl_launch_place pl;
	const char *sched = o->scheduler;
	int rc;

	if (!(v = env1(rank_n, &rank_var))) {
		fprintf(stderr, "pslite-run --mpi: no MPI rank (OMPI_COMM_WORLD_RANK, PMIX_RANK, "
				"PMI_RANK): start it with mpirun -n TASKS\n");
		return 2;
	}
	if (env_long("--mpi", rank_var, v, 0, &job.task))
		return 2;
	if (o->world) {
		job.ntasks = o->world;
	} else if (!(v = env1(size_n, &size_var))) {
		fprintf(stderr,
			"pslite-run --mpi: %s is set but no world size (OMPI_COMM_WORLD_SIZE, "
			"PMI_SIZE): pass --world TASKS\n",
			rank_var);
		return 2;
	} else if (env_long("--mpi", size_var, v, 1, &job.ntasks)) {
		return 2;
	}
	if ((v = env1(lsize_n, &ls_var)) && env_long("--mpi", ls_var, v, 1, &lsize))
		return 2;
	if ((v = env1(lrank_n, &lr_var)) && env_long("--mpi", lr_var, v, 0, &lrank))
		return 2;
	if (lsize > job.ntasks || (lrank >= 0 && lsize && lrank >= lsize)) {
		fprintf(stderr,
			"pslite-run --mpi: inconsistent MPI variables: %s=%ld, %s=%ld, %s=%ld\n",
			size_var ? size_var : "--world", job.ntasks, ls_var ? ls_var : "local size",
			lsize, lr_var ? lr_var : "local rank", lrank);
		return 2;
	}
	if (!sched) {
		if (lsize && lsize == job.ntasks) {
			sched = "127.0.0.1"; /* every task on this machine */
		} else {
			fprintf(stderr, "pslite-run --mpi: the job spans several machines: pass "
					"--scheduler HOST (the host of rank 0) or set "
					"DMLC_PS_ROOT_URI\n");
			return 2;
		}
	}
	if (o->servers_per_node > 0) {
		/* per node: every node holds lsize tasks, by slot (block) */
		if (!lsize || lrank < 0 || job.ntasks % lsize || job.task % lsize != lrank) {
			fprintf(stderr,
				"pslite-run --mpi: --servers-per-node needs the same number of tasks "
				"on every node, mapped by slot (mpirun --map-by slot); here rank %ld "
				"is local rank %ld of %ld, world %ld\n",
				job.task, lrank, lsize, job.ntasks);
			return 2;
		}
		job.nnodes = job.ntasks / lsize;
		counts = calloc((size_t)job.nnodes, sizeof(long));
		if (!counts)
			return 2;
		for (i = 0; i < job.nnodes; i++)
			counts[i] = lsize;
		job.per_node = counts;
	}
	job.servers = o->servers;
	job.servers_per_node = o->servers_per_node;
	if (psl_launch_map(&job, &pl, err, sizeof(err))) {
		fprintf(stderr, "pslite-run --mpi: %s\n", err);
		free(counts);
		return 2;
	}
	free(counts);
	rc = run_task(o, &pl, sched, o->port ? o->port : DEFAULT_PORT, cmd);
	return rc;
}

/* Kubernetes: an Indexed Job (JOB_COMPLETION_INDEX) or a StatefulSet (the
 * ordinal ending the pod's host name). With DMLC_ROLE set (one StatefulSet
 * per role), the ordinal is the rank in that role. */
static int k8s_task(struct taskopts *o, char **cmd)
{
	const char *idx = getenv("JOB_COMPLETION_INDEX"), *role = getenv("DMLC_ROLE");
	const char *ws = getenv("PSLITE_WORLD_SIZE");
	char host[256] = "", err[512];
	long ord;
	struct psl_launch_job job = {0};
	struct psl_launch_place pl;
	const char *sched = o->scheduler;

	if (idx && *idx) {
		if (env_long("--k8s", "JOB_COMPLETION_INDEX", idx, 0, &ord))
			return 2;
	} else {
		const char *h = getenv("HOSTNAME");
		if (h && *h)
			snprintf(host, sizeof(host), "%s", h);
		else
			gethostname(host, sizeof(host) - 1);
		ord = psl_k8s_ordinal(host);
		if (ord < 0) {
			fprintf(stderr,
				"pslite-run --k8s: neither JOB_COMPLETION_INDEX (an Indexed Job) nor a "
				"StatefulSet ordinal in the host name '%s'; run it in such a pod\n",
				host);
			return 2;
		}
	}
	if (!sched) {
		fprintf(stderr, "pslite-run --k8s: pass --scheduler HOST (the scheduler's Service "
				"or pod name) or set DMLC_PS_ROOT_URI\n");
		return 2;
	}
	if (role && *role) {
		/* one StatefulSet per role: the ordinal is the rank */
		long nserver = 0, nworker = 0;
		const char *s = getenv("DMLC_NUM_SERVER"), *w = getenv("DMLC_NUM_WORKER");
		if (!s || !w || env_long("--k8s", "DMLC_NUM_SERVER", s, 1, &nserver) ||
		    env_long("--k8s", "DMLC_NUM_WORKER", w, 1, &nworker)) {
			if (!s || !w)
				fprintf(stderr, "pslite-run --k8s: DMLC_ROLE=%s: set DMLC_NUM_SERVER "
						"and DMLC_NUM_WORKER too\n",
					role);
			return 2;
		}
		/* with instance groups the StatefulSets' replicas are instances:
		 * DMLC_NUM_* (groups) x DMLC_GROUP_SIZE, the ordinal the
		 * instance's rank (run_task turns the counts back into groups) */
		{
			const char *gs = getenv("DMLC_GROUP_SIZE");
			long G = gs && *gs ? strtol(gs, NULL, 10) : 1;
			if (G > 1 && G <= 16000) {
				nserver *= G;
				nworker *= G;
			}
		}
		pl.nserver = nserver;
		pl.nworker = nworker;
		pl.rank = ord;
		if (!strcmp(role, "scheduler")) {
			pl.role = PSL_LAUNCH_SCHEDULER;
			pl.rank = 0;
		} else if (!strcmp(role, "server") || !strcmp(role, "worker")) {
			pl.role = role[1] == 'e' ? PSL_LAUNCH_SERVER : PSL_LAUNCH_WORKER;
			if (ord >= (pl.role == PSL_LAUNCH_SERVER ? nserver : nworker)) {
				fprintf(stderr,
					"pslite-run --k8s: %s ordinal %ld is outside the %ld %s "
					"instances (DMLC_NUM_%s x DMLC_GROUP_SIZE): make the "
					"StatefulSet's replicas match\n",
					role, ord, pl.role == PSL_LAUNCH_SERVER ? nserver : nworker,
					role, pl.role == PSL_LAUNCH_SERVER ? "SERVER" : "WORKER");
				return 2;
			}
		} else {
			fprintf(stderr, "pslite-run --k8s: DMLC_ROLE=%s: expected scheduler, server "
					"or worker\n",
				role);
			return 2;
		}
	} else {
		job.task = ord;
		if (o->world)
			job.ntasks = o->world;
		else if (!ws || env_long("--k8s", "PSLITE_WORLD_SIZE", ws, 1, &job.ntasks)) {
			if (!ws)
				fprintf(stderr, "pslite-run --k8s: pass --world TASKS (the Job's "
						"completions) or set PSLITE_WORLD_SIZE\n");
			return 2;
		}
		job.servers = o->servers;
		if (psl_launch_map(&job, &pl, err, sizeof(err))) {
			fprintf(stderr, "pslite-run --k8s: %s\n", err);
			return 2;
		}
	}
	return run_task(o, &pl, sched, o->port ? o->port : DEFAULT_PORT, cmd);
}

/* ---------------------------------------------------------------- main -- */

/* pslite's tools exit with 3 when the job lost a node: a consequence of
 * another process's failure, which may be seen a moment later (a killed
 * host's ssh ends after the nodes that lost it). Such an exit waits this
 * long for the cause before it counts as the first failure. */
#define LOST_CODE 3
#define LOST_GRACE_MS 5000

static long long mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Says that child i failed first (ssh's 255 as a lost host), and ends the
 * others unless keep_going; whether the job is now ending. */
static bool first_failure(struct child *ch, int n, int i, bool keep_going, time_t *term_at)
{
	int status = ch[i].status;
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

	if (ch[i].host && code == 255)
		fprintf(stderr,
			"pslite-run: %s: ssh to %s failed or lost the connection (exit 255: the "
			"host went away or its processes were killed)%s\n",
			ch[i].label, ch[i].host, keep_going ? "" : "; ending the others");
	else
		fprintf(stderr, "pslite-run: %s exited with %s %d%s\n", ch[i].label,
			WIFEXITED(status) ? "code" : "signal",
			WIFEXITED(status) ? code : WTERMSIG(status),
			keep_going ? "" : "; ending the others");
	if (keep_going)
		return false;
	kill_all(ch, n, SIGTERM, false);
	*term_at = time(NULL);
	return true;
}

/* The IPC rings and markers of nodes that were killed (--timeout, a
 * failure, Ctrl-C): nobody else would remove them. */
static void clean_shm(const struct child *ch, int n)
{
	pid_t *pids = calloc((size_t)n + 1, sizeof(*pids));
	int i, removed;
	if (!pids)
		return;
	for (i = 0; i < n; i++)
		pids[i] = ch[i].pid;
	removed = psl_shm_clean(pids, n);
	if (removed)
		fprintf(stderr, "pslite-run: removed %d shared-memory file(s) (BYTEPS_ENABLE_IPC) "
			"the job's ended nodes left in /dev/shm\n", removed);
	free(pids);
}

int main(int argc, char **argv)
{
	long S = -1, W = -1, J = 0, timeout = 0, G = 1, Sg, Wg;
	const char *van = NULL, *host = "127.0.0.1", *verbose = NULL, *hostfile = NULL;
	const char *ssh_opts = NULL, *mode = NULL;
	char **xvars = NULL;
	int nx = 0, port = 0, i, n, cmd = -1, first_fail = 0, running, rc, restart = 0, lost = -1;
	long long lost_at = 0;
	struct child *ch = NULL;
	struct pollfd *pfd = NULL;
	char num[32], err[1024];
	time_t t0 = time(NULL), term_at = 0;
	bool ended = false, keep_going = false, dry_run = false;
	struct taskopts to = {0};
	struct psl_host *hosts = NULL;
	size_t nh = 0, *where = NULL;
	struct sshcfg sc = {0};

	xvars = calloc((size_t)argc, sizeof(char *));
	if (!xvars)
		return 2;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			cmd = i + 1;
			break;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			rc = help();
			goto out;
		} else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
			S = parse_pos("-s", argv[++i], 16000);
		} else if (!strcmp(argv[i], "-w") && i + 1 < argc) {
			W = parse_pos("-w", argv[++i], 16000);
		} else if ((!strcmp(argv[i], "-j") || !strcmp(argv[i], "--joint")) && i + 1 < argc) {
			J = parse_pos(argv[i], argv[i + 1], 16000);
			i++;
		} else if (!strcmp(argv[i], "--van") && i + 1 < argc) {
			van = argv[++i];
		} else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
			port = (int)parse_pos("--port", argv[++i], 65535);
		} else if (!strcmp(argv[i], "--host") && i + 1 < argc) {
			host = argv[++i];
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			timeout = parse_pos("--timeout", argv[++i], 86400 * 30);
		} else if (!strcmp(argv[i], "--keep-going")) {
			keep_going = true;
		} else if (!strcmp(argv[i], "--restart") && i + 1 < argc) {
			restart = (int)parse_pos("--restart", argv[++i], 1000);
		} else if (!strcmp(argv[i], "--verbose") && i + 1 < argc) {
			verbose = argv[++i];
		} else if (!strcmp(argv[i], "--hostfile") && i + 1 < argc) {
			hostfile = argv[++i];
		} else if (!strcmp(argv[i], "--ssh-opts") && i + 1 < argc) {
			ssh_opts = argv[++i];
		} else if (!strcmp(argv[i], "-x") && i + 1 < argc) {
			xvars[nx++] = argv[++i];
		} else if (!strcmp(argv[i], "--slurm") || !strcmp(argv[i], "--mpi") ||
			   !strcmp(argv[i], "--k8s")) {
			if (mode && strcmp(mode, argv[i])) {
				fprintf(stderr, "pslite-run: %s and %s: pick one\n", mode, argv[i]);
				rc = 2;
				goto out;
			}
			mode = argv[i];
		} else if (!strcmp(argv[i], "--servers-per-node") && i + 1 < argc) {
			to.servers_per_node = parse_pos("--servers-per-node", argv[++i], 16000);
		} else if (!strcmp(argv[i], "--scheduler") && i + 1 < argc) {
			to.scheduler = argv[++i];
		} else if (!strcmp(argv[i], "--world") && i + 1 < argc) {
			to.world = parse_pos("--world", argv[++i], 1000000);
		} else if (!strcmp(argv[i], "--dry-run")) {
			dry_run = true;
		} else {
			rc = usage();
			goto out;
		}
	}
	if (cmd < 0 || cmd >= argc) {
		rc = usage();
		goto out;
	}
	if (mode) {
		if (hostfile || W > 0 || J > 0 || timeout || keep_going || nx || restart) {
			fprintf(stderr, "pslite-run %s: %s does not go with it: the launcher's tasks "
					"are the job (-s or --servers-per-node pick the servers) and the "
					"launcher runs them\n",
				mode,
				hostfile     ? "--hostfile"
				: W > 0      ? "-w"
				: J > 0      ? "--joint"
				: timeout    ? "--timeout"
				: keep_going ? "--keep-going"
				: restart    ? "--restart"
					     : "-x");
			rc = 2;
			goto out;
		}
		if (S > 0 && to.servers_per_node) {
			fprintf(stderr, "pslite-run %s: -s and --servers-per-node: pick one\n", mode);
			rc = 2;
			goto out;
		}
		to.mode = mode;
		to.servers = S > 0 ? S : 0;
		to.van = van;
		to.verbose = verbose;
		to.port = port;
		to.dry_run = dry_run;
		if (!port && getenv("DMLC_PS_ROOT_PORT") && *getenv("DMLC_PS_ROOT_PORT"))
			to.port = (int)parse_pos("DMLC_PS_ROOT_PORT", getenv("DMLC_PS_ROOT_PORT"),
						 65535);
		if (!to.scheduler && getenv("DMLC_PS_ROOT_URI") && *getenv("DMLC_PS_ROOT_URI"))
			to.scheduler = getenv("DMLC_PS_ROOT_URI");
		rc = !strcmp(mode, "--slurm") ? slurm_task(&to, argv + cmd)
		     : !strcmp(mode, "--mpi") ? mpi_task(&to, argv + cmd)
					      : k8s_task(&to, argv + cmd);
		goto out;
	}
	if (to.servers_per_node || to.scheduler || to.world || (dry_run && !hostfile)) {
		fprintf(stderr, "pslite-run: %s goes with --slurm, --mpi or --k8s%s\n",
			to.servers_per_node ? "--servers-per-node"
			: to.scheduler	    ? "--scheduler"
			: to.world	    ? "--world"
					    : "--dry-run",
			dry_run && !to.servers_per_node && !to.scheduler && !to.world
			    ? " (or --hostfile)"
			    : "; on one machine or with --hostfile, -s and -w give the job");
		rc = 2;
		goto out;
	}
	/* --joint J: J processes more, each a server and a worker (DMLC_ROLE=joint) */
	if (J > 0 && (hostfile || (getenv("DMLC_GROUP_SIZE") && *getenv("DMLC_GROUP_SIZE") &&
				   strcmp(getenv("DMLC_GROUP_SIZE"), "1")))) {
		fprintf(stderr, "pslite-run: --joint runs on this machine without instance groups: "
				"drop --hostfile or DMLC_GROUP_SIZE, or start the joint processes "
				"with DMLC_ROLE=joint yourself\n");
		rc = 2;
		goto out;
	}
	if (J > 0 && S < 0)
		S = 0;
	if (J > 0 && W < 0)
		W = 0;
	if (S + J < 1 || W + J < 1 || S + J > 16000 || W + J > 16000) {
		rc = usage();
		goto out;
	}
	/* instance groups: S and W count groups, each process is one instance
	 * (DMLC_RANK its instance rank, docs/wire.md section 3) */
	if (getenv("DMLC_GROUP_SIZE") && *getenv("DMLC_GROUP_SIZE"))
		G = parse_pos("DMLC_GROUP_SIZE", getenv("DMLC_GROUP_SIZE"), 16000);
	if (G < 1 || S * G > 16000 || W * G > 16000) {
		fprintf(stderr, "pslite-run: DMLC_GROUP_SIZE=%s with -s %ld -w %ld: expected a "
				"group size from 1 with at most 16000 server and worker instances\n",
			getenv("DMLC_GROUP_SIZE"), S, W);
		rc = 2;
		goto out;
	}
	if (G > 1) /* (ps-lite's C++ StartPS would start the whole group) */
		setenv("PS_GROUP_IN_PROCESS", "0", 1);
	Sg = S + J;
	Wg = W + J;
	S *= G;
	W *= G;
	n = (int)(1 + S + W + J);
	if (hostfile) {
		where = calloc((size_t)n, sizeof(*where));
		if (!where || psl_hostfile_read(hostfile, &hosts, &nh, err, sizeof(err)) ||
		    psl_hostfile_place(hosts, nh, S, W, where, err, sizeof(err))) {
			fprintf(stderr, "pslite-run: %s\n", where ? err : "out of memory");
			rc = 2;
			goto out;
		}
		host = host_addr(&hosts[where[0]]);
		if (!port && getenv("DMLC_PS_ROOT_PORT") && *getenv("DMLC_PS_ROOT_PORT"))
			port = (int)parse_pos("DMLC_PS_ROOT_PORT", getenv("DMLC_PS_ROOT_PORT"), 65535);
		if (!port)
			port = DEFAULT_PORT;
		if (dry_run) {
			for (i = 0; i < n; i++)
				printf("%s %s %ld\n", hosts[where[i]].name,
				       psl_launch_role_name(i == 0 ? PSL_LAUNCH_SCHEDULER
							    : i <= S ? PSL_LAUNCH_SERVER
								     : PSL_LAUNCH_WORKER),
				       i == 0 ? 0L : i <= S ? i - 1L : i - 1L - S);
			rc = 0;
			goto out;
		}
		if (ssh_setup(&sc, getenv("PSLITE_SSH_OPTS"), ssh_opts)) {
			rc = 2;
			goto out;
		}
	}
	if (!port)
		port = psl_tool_free_port(host);
	if (!port) {
		fprintf(stderr, "pslite-run: cannot find a free port on %s: pass --port\n", host);
		rc = 2;
		goto out;
	}
	ch = calloc((size_t)n, sizeof(*ch));
	if (!ch) {
		rc = 2;
		goto out;
	}
	if (restart && (hostfile || J > 0)) {
		fprintf(stderr, "pslite-run: --restart with %s: a node is started again on this "
				"machine only, and a joint process cannot take its own place; "
				"leave one of them out\n",
			hostfile ? "--hostfile" : "--joint");
		rc = 2;
		goto out;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (restart)
		setenv("PS_RECOVERY", "1", 1);

	setenv("DMLC_PS_ROOT_URI", host, 1);
	snprintf(num, sizeof(num), "%d", port);
	setenv("DMLC_PS_ROOT_PORT", num, 1);
	snprintf(num, sizeof(num), "%ld", Sg);
	setenv("DMLC_NUM_SERVER", num, 1);
	snprintf(num, sizeof(num), "%ld", Wg);
	setenv("DMLC_NUM_WORKER", num, 1);
	if (!hostfile && (!getenv("DMLC_NODE_HOST") || !*getenv("DMLC_NODE_HOST")))
		setenv("DMLC_NODE_HOST", host, 1);
	if (van)
		setenv("DMLC_ENABLE_RDMA", van, 1);
	if (verbose)
		setenv("PS_VERBOSE", verbose, 1);
	unsetenv("DMLC_PORT"); /* every node on this host needs a port of its own */

	if (hostfile && ssh_preflight(&sc, hosts, nh, argv[cmd])) {
		rc = 2;
		goto out;
	}

	for (i = 0; i < n; i++) {
		struct child *c = &ch[i];
		int in[2] = {-1, -1};
		long rank = i == 0 ? 0 : i <= S ? i - 1 : i <= S + W ? (long)(i - 1 - S) : i - 1 - S - W;
		int role = i == 0 ? PSL_LAUNCH_SCHEDULER
			   : i <= S ? PSL_LAUNCH_SERVER
			   : i <= S + W ? PSL_LAUNCH_WORKER
					: PSL_LAUNCH_JOINT;
		char *script = NULL, **sv = NULL;
		c->in = -1;
		if (hostfile) {
			c->host = hosts[where[i]].name;
			if (i == 0)
				snprintf(c->label, sizeof(c->label), "%s scheduler", c->host);
			else
				snprintf(c->label, sizeof(c->label), "%s %s %ld", c->host,
					 psl_launch_role_name(role), rank);
			script = remote_script(&hosts[where[i]], role, rank, xvars, nx, argv + cmd);
			sv = script ? ssh_argv(&sc, c->host, script) : NULL;
			if (!sv || pipe2(in, O_CLOEXEC)) {
				free(script);
				kill_all(ch, i, SIGKILL, true);
				first_fail = 2;
				n = i;
				goto wait_all;
			}
		} else if (i == 0) {
			snprintf(c->label, sizeof(c->label), "scheduler");
		} else if (G > 1) { /* group rank.instance, as the library logs it */
			snprintf(c->label, sizeof(c->label), "%s %ld.%ld", psl_launch_role_name(role),
				 rank / G, rank % G);
		} else {
			snprintf(c->label, sizeof(c->label), "%s %ld", psl_launch_role_name(role), rank);
		}
		c->role = role;
		c->rank = rank;
		rc = start_child(c, sv, in, J > 0, argv + cmd);
		free(script);
		free(sv);
		if (rc) {
			kill_all(ch, i, SIGKILL, true);
			rc = 2;
			goto out;
		}
	}

wait_all:
	pfd = calloc(2 * (size_t)n + 1, sizeof(*pfd));
	if (!pfd) {
		rc = 2;
		goto out;
	}
	if (first_fail) { /* could not start them all */
		ended = true;
		term_at = time(NULL);
	}
	for (;;) {
		int np = 0, k;
		pid_t pid;
		int status;

		for (i = 0; i < n; i++)
			for (k = 0; k < 2; k++)
				if (ch[i].fd[k] >= 0)
					pfd[np++] = (struct pollfd){ch[i].fd[k], POLLIN, 0};
		poll(pfd, (nfds_t)np, 200);
		for (i = 0; i < n; i++)
			for (k = 0; k < 2; k++) {
				int j;
				for (j = 0; j < np; j++)
					if (pfd[j].fd == ch[i].fd[k] && pfd[j].revents)
						read_child(&ch[i], k);
			}
		/* before the exits of this round: a Ctrl-C that reached the
		 * children too is the cause, not their exits */
		if (g_signal && !ended) {
			fprintf(stderr, "pslite-run: got signal %d; ending the job\n", (int)g_signal);
			kill_all(ch, n, SIGTERM, false);
			first_fail = 128 + (int)g_signal;
			ended = true;
			term_at = time(NULL);
		}
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			for (i = 0; i < n; i++) {
				int code;
				if (ch[i].pid != pid)
					continue;
				ch[i].running = false;
				ch[i].status = status;
				code = WIFEXITED(status) ? WEXITSTATUS(status)
							 : 128 + WTERMSIG(status);
				if (code && !ended && restart) {
					fprintf(stderr, "pslite-run: %s exited with %s %d\n",
						ch[i].label, WIFEXITED(status) ? "code" : "signal",
						WIFEXITED(status) ? code : WTERMSIG(status));
					if (restart_child(&ch, &n, &pfd, i, restart, argv + cmd))
						break; /* (ch moved) */
				}
				if (code == LOST_CODE && !first_fail && !ended && lost < 0) {
					lost = i; /* a consequence: the cause may follow */
					lost_at = mono_ms();
				} else if (code && !first_fail && !ended) {
					first_fail = code;
					ended = first_failure(ch, n, i, keep_going, &term_at);
				}
			}
		}
		/* the job-lost exit alone, or all that ended: it is the first */
		if (lost >= 0 && !first_fail && !ended) {
			running = 0;
			for (i = 0; i < n; i++)
				running += ch[i].running;
			if (!running || mono_ms() - lost_at >= LOST_GRACE_MS) {
				first_fail = LOST_CODE;
				ended = first_failure(ch, n, lost, keep_going, &term_at);
			}
		}
		if (timeout && !ended && time(NULL) - t0 >= timeout) {
			fprintf(stderr, "pslite-run: the job ran past --timeout %ld s; ending it\n",
				timeout);
			kill_all(ch, n, SIGTERM, false);
			first_fail = 124;
			ended = true;
			term_at = time(NULL);
		}
		/* ssh's remote wrapper escalates to KILL after 5 s itself */
		if (ended && time(NULL) - term_at >= (hostfile ? 10 : 5))
			kill_all(ch, n, SIGKILL, true);
		running = 0;
		for (i = 0; i < n; i++)
			running += ch[i].running || ch[i].fd[0] >= 0 || ch[i].fd[1] >= 0;
		if (!running)
			break;
		/* a child that exited but whose pipes a grandchild holds open */
		for (i = 0; i < n; i++)
			if (!ch[i].running && ended && time(NULL) - term_at >= (hostfile ? 11 : 6)) {
				if (ch[i].fd[0] >= 0)
					close(ch[i].fd[0]);
				if (ch[i].fd[1] >= 0)
					close(ch[i].fd[1]);
				ch[i].fd[0] = ch[i].fd[1] = -1;
			}
	}
	for (i = 0; i < n; i++)
		if (ch[i].in >= 0)
			close(ch[i].in);
	rc = first_fail;
	if (!hostfile)
		clean_shm(ch, n);
	if (rc)
		report_blame(Sg, Wg, G);
out:
	free(pfd);
	free(ch);
	free(hosts);
	free(where);
	free(xvars);
	ssh_free(&sc);
	return rc;
}
