/* Which node of a job is the misconfigured one (blame.h). */
#include "blame.h"

#include <stdio.h>
#include <string.h>

#define OWN_TAG "refused this node's registration: "
#define SCHED_TAG "refused the registration of the "

bool psl_blame_parse(const char *line, struct psl_blame *b)
{
	const char *p = strstr(line, OWN_TAG);
	char var2[32], role[16], addr[64];

	memset(b, 0, sizeof(*b));
	b->own = p != NULL;
	if (p) {
		p += strlen(OWN_TAG);
	} else if ((p = strstr(line, SCHED_TAG)) && (p = strstr(p, ": "))) {
		p += 2;
	} else {
		return false;
	}
	if (sscanf(p, "%31[A-Z_]=%ld at the %15[a-z] at %63[^,], but %31[A-Z_]=%ld at the scheduler",
		   b->var, &b->node_val, role, addr, var2, &b->sched_val) != 6 ||
	    strcmp(b->var, var2))
		return false;
	snprintf(b->node, sizeof(b->node), "%s at %s", role, addr);
	return true;
}

int psl_blame_judge(const struct psl_blame *b, long want, const char *label, char *out,
		    size_t len)
{
	if (b->node_val != want && b->sched_val == want) {
		if (b->own)
			snprintf(out, len, "%s (the %s) is misconfigured: it has %s=%ld, but "
				 "pslite-run set %s=%ld for every node: fix how %s is started",
				 label, b->node, b->var, b->node_val, b->var, want, label);
		else
			snprintf(out, len, "the %s is misconfigured: it has %s=%ld, but "
				 "pslite-run set %s=%ld for every node: fix how it is started",
				 b->node, b->var, b->node_val, b->var, want);
		return 1;
	}
	if (b->sched_val != want && b->node_val == want) {
		snprintf(out, len, "the scheduler is misconfigured: it has %s=%ld, but "
			 "pslite-run set %s=%ld for every node (the %s has %ld): fix how the "
			 "scheduler is started",
			 b->var, b->sched_val, b->var, want, b->node, b->node_val);
		return 2;
	}
	snprintf(out, len, "%s=%ld at the %s, but %s=%ld at the scheduler, and pslite-run set "
		 "%s=%ld: the command sets its own %s; give every node the same value",
		 b->var, b->node_val, b->node, b->var, b->sched_val, b->var, want, b->var);
	return 0;
}
