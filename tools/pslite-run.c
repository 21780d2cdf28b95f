/*
 * pslite-run: start a whole job on this machine.
 *
 *   pslite-run -s S -w W [--van NAME] [--port P] [--host H] [--timeout SEC]
 *              [--verbose N] [--keep-going] -- COMMAND [ARGS...]
 *
 * Starts one scheduler, S servers and W workers, each running COMMAND with
 * the ps-lite environment of its role (DMLC_ROLE, DMLC_PS_ROOT_URI,
 * DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER, DMLC_NUM_WORKER, DMLC_NODE_HOST,
 * DMLC_RANK, and DMLC_ENABLE_RDMA for --van). Every output line is prefixed
 * with the role and rank. The first process to fail decides the exit code and
 * the others are ended (with --keep-going they run on, and the first failure
 * is still the exit code); with --timeout, everything is ended after SEC
 * seconds and the exit code is 124.
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

#include "freeport.h"

struct child {
	pid_t pid;
	char label[32];
	int fd[2]; /* stdout, stderr pipes */
	char buf[2][4096];
	size_t len[2];
	bool running;
	int status;
};

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
	g_signal = sig;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: pslite-run -s SERVERS -w WORKERS [--van NAME] [--port PORT] [--host HOST]\n"
		"                  [--timeout SECONDS] [--verbose N] [--keep-going] -- COMMAND [ARGS...]\n"
		"Starts a scheduler, SERVERS servers and WORKERS workers on this machine, each\n"
		"running COMMAND with the ps-lite environment of its role.\n");
	return 2;
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

/* A port that is free now (the scheduler binds it a moment later). */
static void flush_line(struct child *c, int k, bool all)
{
	char *nl;
	FILE *out = k == 0 ? stdout : stderr;
	while ((nl = memchr(c->buf[k], '\n', c->len[k])) || (all && c->len[k])) {
		size_t n = nl ? (size_t)(nl - c->buf[k]) + 1 : c->len[k];
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

static void kill_all(struct child *ch, int n, int sig)
{
	int i;
	for (i = 0; i < n; i++)
		if (ch[i].running)
			kill(ch[i].pid, sig);
}

int main(int argc, char **argv)
{
	long S = -1, W = -1, timeout = 0;
	const char *van = NULL, *host = "127.0.0.1", *verbose = NULL;
	int port = 0, i, n, cmd = -1, first_fail = 0, running;
	struct child *ch;
	struct pollfd *pfd;
	char num[32];
	time_t t0 = time(NULL), term_at = 0;
	bool ended = false, keep_going = false;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			cmd = i + 1;
			break;
		} else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
			S = parse_pos("-s", argv[++i], 16000);
		} else if (!strcmp(argv[i], "-w") && i + 1 < argc) {
			W = parse_pos("-w", argv[++i], 16000);
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
		} else if (!strcmp(argv[i], "--verbose") && i + 1 < argc) {
			verbose = argv[++i];
		} else {
			return usage();
		}
	}
	if (cmd < 0 || cmd >= argc || S < 1 || W < 1)
		return usage();
	if (!port)
		port = psl_tool_free_port(host);
	if (!port) {
		fprintf(stderr, "pslite-run: cannot find a free port on %s: pass --port\n", host);
		return 2;
	}
	n = (int)(1 + S + W);
	ch = calloc((size_t)n, sizeof(*ch));
	if (!ch)
		return 2;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	setenv("DMLC_PS_ROOT_URI", host, 1);
	snprintf(num, sizeof(num), "%d", port);
	setenv("DMLC_PS_ROOT_PORT", num, 1);
	snprintf(num, sizeof(num), "%ld", S);
	setenv("DMLC_NUM_SERVER", num, 1);
	snprintf(num, sizeof(num), "%ld", W);
	setenv("DMLC_NUM_WORKER", num, 1);
	if (!getenv("DMLC_NODE_HOST") || !*getenv("DMLC_NODE_HOST"))
		setenv("DMLC_NODE_HOST", host, 1);
	if (van)
		setenv("DMLC_ENABLE_RDMA", van, 1);
	if (verbose)
		setenv("PS_VERBOSE", verbose, 1);
	unsetenv("DMLC_PORT"); /* every node on this host needs a port of its own */

	for (i = 0; i < n; i++) {
		struct child *c = &ch[i];
		int out[2], err[2], rank = i == 0 ? 0 : i <= S ? i - 1 : (int)(i - 1 - S);
		const char *role = i == 0 ? "scheduler" : i <= S ? "server" : "worker";
		if (i == 0)
			snprintf(c->label, sizeof(c->label), "scheduler");
		else
			snprintf(c->label, sizeof(c->label), "%s %d", role, rank);
		if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
			perror("pslite-run: pipe");
			kill_all(ch, i, SIGKILL);
			return 2;
		}
		c->pid = fork();
		if (c->pid < 0) {
			perror("pslite-run: fork");
			kill_all(ch, i, SIGKILL);
			return 2;
		}
		if (c->pid == 0) {
			dup2(out[1], 1);
			dup2(err[1], 2);
			setenv("DMLC_ROLE", role, 1);
			if (i > 0) {
				snprintf(num, sizeof(num), "%d", rank);
				setenv("DMLC_RANK", num, 1);
			}
			execvp(argv[cmd], argv + cmd);
			fprintf(stderr, "pslite-run: cannot run %s: %s\n", argv[cmd], strerror(errno));
			_exit(127);
		}
		close(out[1]);
		close(err[1]);
		c->fd[0] = out[0];
		c->fd[1] = err[0];
		c->running = true;
	}

	pfd = calloc(2 * (size_t)n, sizeof(*pfd));
	if (!pfd)
		return 2;
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
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			for (i = 0; i < n; i++) {
				int code;
				if (ch[i].pid != pid)
					continue;
				ch[i].running = false;
				ch[i].status = status;
				code = WIFEXITED(status) ? WEXITSTATUS(status)
							 : 128 + WTERMSIG(status);
				if (code && !first_fail && !ended) {
					first_fail = code;
					fprintf(stderr, "pslite-run: %s exited with %s %d%s\n",
						ch[i].label, WIFEXITED(status) ? "code" : "signal",
						WIFEXITED(status) ? code : WTERMSIG(status),
						keep_going ? "" : "; ending the others");
					if (!keep_going) {
						kill_all(ch, n, SIGTERM);
						ended = true;
						term_at = time(NULL);
					}
				}
			}
		}
		if (g_signal && !ended) {
			fprintf(stderr, "pslite-run: got signal %d; ending the job\n", (int)g_signal);
			kill_all(ch, n, SIGTERM);
			first_fail = 128 + (int)g_signal;
			ended = true;
			term_at = time(NULL);
		}
		if (timeout && !ended && time(NULL) - t0 >= timeout) {
			fprintf(stderr, "pslite-run: the job ran past --timeout %ld s; ending it\n",
				timeout);
			kill_all(ch, n, SIGTERM);
			first_fail = 124;
			ended = true;
			term_at = time(NULL);
		}
		if (ended && time(NULL) - term_at >= 5)
			kill_all(ch, n, SIGKILL);
		running = 0;
		for (i = 0; i < n; i++)
			running += ch[i].running || ch[i].fd[0] >= 0 || ch[i].fd[1] >= 0;
		if (!running)
			break;
		/* a child that exited but whose pipes a grandchild holds open */
		for (i = 0; i < n; i++)
			if (!ch[i].running && ended && time(NULL) - term_at >= 6) {
				if (ch[i].fd[0] >= 0)
					close(ch[i].fd[0]);
				if (ch[i].fd[1] >= 0)
					close(ch[i].fd[1]);
				ch[i].fd[0] = ch[i].fd[1] = -1;
			}
	}
	free(pfd);
	free(ch);
	return first_fail;
}
