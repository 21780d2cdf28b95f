/*
 * pslite-info: the vans this pslite finds, their versions and what they can
 * do on this machine, and why any of them cannot load (like fi_info and
 * ucx_info).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <pslite.h>
#include <pslite/van.h>

struct tally {
	int ok, bad;
	bool verbose;
};

static void show(const struct psl_van_info *v, void *arg)
{
	struct tally *t = arg;
	if (v->shadowed) {
		printf("  %-8s %s\n           (not used: an earlier folder of the search path has "
		       "van_%s.so)\n",
		       v->name, v->path, v->name);
		return;
	}
	if (v->status) {
		t->bad++;
		printf("  %-8s UNAVAILABLE  %s\n           %s\n", v->name, v->path, v->error);
		if (v->version[0])
			printf("           version: %s\n", v->version);
		return;
	}
	t->ok++;
	printf("  %-8s ok           %s\n", v->name, v->path);
	printf("           version:      %s (van ABI %u.%u)\n", v->version, v->abi_major,
	       v->abi_minor);
	if (v->description[0])
		printf("           description:  %s\n", v->description);
	printf("           transports:   %s\n", v->transports[0] ? v->transports : "-");
	printf("           zero-copy:    send %s, receive %s\n",
	       v->caps & PSL_VAN_CAP_ZC_SEND ? "yes" : "no",
	       v->caps & PSL_VAN_CAP_ZC_RECV ? "yes" : "no");
	printf("           memory:       host%s%s\n", v->caps & PSL_VAN_CAP_MEM_CUDA ? ", cuda" : "",
	       v->caps & PSL_VAN_CAP_NEEDS_MR ? " (registration needed)" : "");
	if (v->max_msg_size)
		printf("           max message:  %" PRIu64 " bytes\n", v->max_msg_size);
	if (v->caps & PSL_VAN_CAP_PSLITE_WIRE)
		printf("           wire:         compatible with ps-lite (byteps branch) nodes\n");
}

int main(int argc, char **argv)
{
	struct tally t = {0, 0, false};
	int n;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: pslite-info\nLists the vans found on the van search path "
		       "(PS_VAN_PATH first), what each can do here, and why any cannot load;\n"
		       "then the CUDA runtime and GPUs pslite finds (PS_CUDA_LIB to choose the "
		       "runtime).\n");
		return 0;
	}
	printf("pslite %s, van ABI %d.%d\n", PSL_VERSION_STRING, PSL_VAN_ABI_MAJOR,
	       PSL_VAN_ABI_MINOR);
	printf("van search path: %s\n", psl_van_search_path());
	printf("vans (choose with DMLC_ENABLE_RDMA: unset or 0 = zmq, 1 = ibverbs, else the "
	       "name):\n");
	n = psl_van_probe(show, &t);
	if (n <= 0)
		printf("  none found: install pslite (make install), or set PS_VAN_PATH to the "
		       "folder that holds van_*.so\n");
	{
		/* GPU buffers work with any van: staged through pinned host memory
		 * where the van does not take CUDA memory itself */
		char cuda[1024];
		int nd = psl_cuda_describe(cuda, sizeof(cuda));
		printf("cuda (GPU buffers; PS_CUDA_LIB chooses the runtime):\n  %s%s\n",
		       nd > 0 ? "" : "unavailable: ", cuda);
	}
	return n > 0 && t.ok ? 0 : 1;
}
