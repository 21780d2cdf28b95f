/* The files BYTEPS_ENABLE_IPC leaves in /dev/shm, and whose process each
 * belongs to: a ring is named pslite-ipc-PID-FROM-TO after the process that
 * made it, a marker pslite-ipcnode-JOB-ID holds its node's pid on its first
 * line, and one still being written is named after its writer
 * (pslite-ipcnode-JOB-ID.PID). Used by the core (ipc.c: what ended
 * processes left) and by pslite-run (what its killed nodes left). */
#ifndef PSL_CORE_IPC_FILES_H
#define PSL_CORE_IPC_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PSL__IPC_DIR "/dev/shm"

/* The pid file name (in PSL__IPC_DIR) belongs to; 0 if it is no file of
 * pslite's IPC, or its pid cannot be read (another node of this machine
 * may be writing it right now). */
static inline long psl__ipc_file_pid(const char *name)
{
	char path[512], buf[128];
	const char *dot;
	long pid = 0;
	FILE *f;
	if (!strncmp(name, "pslite-ipc-", 11))
		return strtol(name + 11, NULL, 10);
	if (strncmp(name, "pslite-ipcnode-", 15))
		return 0;
	if ((dot = strrchr(name, '.')))
		return strtol(dot + 1, NULL, 10);
	snprintf(path, sizeof(path), PSL__IPC_DIR "/%s", name);
	if ((f = fopen(path, "r"))) {
		if (fgets(buf, sizeof(buf), f))
			pid = strtol(buf, NULL, 10);
		fclose(f);
	}
	return pid;
}

#endif
