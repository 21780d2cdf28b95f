/* Finding, loading and checking van plugins (van_<name>.so). */
#ifndef PSL_CORE_VAN_LOADER_H
#define PSL_CORE_VAN_LOADER_H

#include <limits.h>
#include <stddef.h>

#include "pslite/van.h"

struct psl__van_lib {
	void *dl;
	const struct psl_van_ops *ops;
	char path[PATH_MAX];
};

/* The directories searched, in order: PS_VAN_PATH (a colon list), the pslite/
 * folder beside the loaded libpslite.so, the configured van directory.
 * Returns how many were written into dirs. */
int psl__van_dirs(char (*dirs)[PATH_MAX], int max);

/* Loads van_<name>.so from the search path and checks it. On failure
 * returns a negative errno and writes one line into err naming the file(s)
 * tried, what was expected and what was found. */
int psl__van_open(const char *name, struct psl__van_lib *lib, char *err, size_t errlen);

/* Loads and checks one file; expect_name is the van name its file name
 * implies (NULL: derive it from path). */
int psl__van_open_path(const char *path, const char *expect_name, struct psl__van_lib *lib,
		       char *err, size_t errlen);

void psl__van_close(struct psl__van_lib *lib);

#endif
