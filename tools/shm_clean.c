/* pslite-run: what nodes killed before their finalize left in /dev/shm.
 * The core names a ring pslite-ipc-PID-FROM-TO after the process that
 * created it, and a node's marker pslite-ipcnode-JOB-ID holds its pid on its
 * first line (core/ipc.c); the next node with IPC on removes what gone
 * processes left, but when a whole job is killed nobody comes after it. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm_clean.h"

#define SHM_DIR "/dev/shm"

static bool ours_and_gone(long pid, const pid_t *pids, int n)
{
	int i;
	if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno == EPERM)
		return false;
	for (i = 0; i < n; i++)
		if (pids[i] == (pid_t)pid)
			return true;
	return false;
}

/* The pid a file of the core's IPC names or holds, 0 if none. */
static long file_pid(const char *name)
{
	char path[512], buf[64];
	long pid = 0;
	FILE *f;
	if (!strncmp(name, "pslite-ipc-", 11))
		return strtol(name + 11, NULL, 10);
	if (strncmp(name, "pslite-ipcnode-", 15) || strchr(name, '.'))
		return 0; /* (a marker still being written is its writer's to finish) */
	snprintf(path, sizeof(path), SHM_DIR "/%s", name);
	if ((f = fopen(path, "r"))) {
		if (fgets(buf, sizeof(buf), f))
			pid = strtol(buf, NULL, 10);
		fclose(f);
	}
	return pid;
}

int psl_shm_clean(const pid_t *pids, int n)
{
	DIR *d = opendir(SHM_DIR);
	struct dirent *e;
	int removed = 0;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[512];
		if (!ours_and_gone(file_pid(e->d_name), pids, n))
			continue;
		snprintf(path, sizeof(path), SHM_DIR "/%s", e->d_name);
		if (unlink(path) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}
