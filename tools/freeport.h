/*
 * The scheduler's port for jobs started on one machine (pslite-run, the
 * tests' startnode --free-port).
 */
#ifndef PSL_TOOLS_FREEPORT_H
#define PSL_TOOLS_FREEPORT_H

/* A TCP port of host (IPv4 text; anything else: 127.0.0.1) that is free
 * now, chosen below the kernel's range of ephemeral ports
 * (/proc/sys/net/ipv4/ip_local_port_range): the job's other nodes bind port
 * 0 while the scheduler starts, and the kernel could give one of them this
 * very port first ("port N is already in use", seen in make check). Falls
 * back to a port the kernel picks; 0 if there is none. */
int psl_tool_free_port(const char *host);

#endif
