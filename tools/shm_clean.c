/* pslite-run: what nodes killed before their finalize left in /dev/shm
 * (core/ipc_files.h says whose each file is); the next node with IPC on
 * removes what gone processes left, but when a whole job is killed nobody
 * comes after it. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc_files.h"
#include "shm_clean.h"

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

int psl_shm_clean(const pid_t *pids, int n)
{
	DIR *d = opendir(PSL__IPC_DIR);
	struct dirent *e;
	int removed = 0;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[512];
		if (!ours_and_gone(psl__ipc_file_pid(e->d_name), pids, n))
			continue;
		snprintf(path, sizeof(path), PSL__IPC_DIR "/%s", e->d_name);
		if (unlink(path) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}
