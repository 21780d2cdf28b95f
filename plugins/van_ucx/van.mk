# van_ucx: build rules and tests (included by Makefile.am).
if BUILD_VAN_UCX
pkglib_LTLIBRARIES += plugins/van_ucx/van_ucx.la
plugins_van_ucx_van_ucx_la_SOURCES = \
	plugins/van_ucx/van_ucx.c plugins/van_ucx/ucx_van.h \
	plugins/van_ucx/ucx_boot.c plugins/van_ucx/ucx_connect.c \
	plugins/van_ucx/ucx_send.c plugins/van_ucx/ucx_recv.c plugins/van_ucx/ucx_drive.c \
	plugins/van_ucx/ucx_proto.c plugins/van_ucx/ucx_proto.h
plugins_van_ucx_van_ucx_la_CPPFLAGS = $(VAN_CPPFLAGS) $(UCX_DEFS)
plugins_van_ucx_van_ucx_la_CFLAGS = $(AM_CFLAGS) $(UCX_CFLAGS)
plugins_van_ucx_van_ucx_la_LIBADD = $(UCX_LIBS)
plugins_van_ucx_van_ucx_la_LDFLAGS = $(VAN_LDFLAGS)
VAN_DIRS += $(abs_top_builddir)/plugins/van_ucx/.libs
endif

# Wire formats and decisions of van_ucx (no UCX needed to run them).
if HAVE_CMOCKA
check_PROGRAMS += plugins/van_ucx/tests/test_van_ucx_proto
plugins_van_ucx_tests_test_van_ucx_proto_SOURCES = plugins/van_ucx/tests/test_van_ucx_proto.c \
	plugins/van_ucx/ucx_proto.c plugins/van_ucx/ucx_proto.h
plugins_van_ucx_tests_test_van_ucx_proto_CPPFLAGS = $(VAN_CPPFLAGS) -I$(top_srcdir)/plugins/van_ucx
plugins_van_ucx_tests_test_van_ucx_proto_CFLAGS = $(TEST_CFLAGS)
plugins_van_ucx_tests_test_van_ucx_proto_LDADD = $(CMOCKA_LIBS)
TESTS += plugins/van_ucx/tests/test_van_ucx_proto
endif

# The van ABI contract, on van_ucx.so itself with a host of the test's own.
if BUILD_VAN_UCX
if HAVE_CMOCKA
check_PROGRAMS += plugins/van_ucx/tests/test_van_ucx_contract
plugins_van_ucx_tests_test_van_ucx_contract_SOURCES = plugins/van_ucx/tests/test_van_ucx_contract.c
plugins_van_ucx_tests_test_van_ucx_contract_CPPFLAGS = $(VAN_CPPFLAGS)
plugins_van_ucx_tests_test_van_ucx_contract_CFLAGS = $(TEST_CFLAGS)
plugins_van_ucx_tests_test_van_ucx_contract_LDADD = $(CMOCKA_LIBS)
TESTS += plugins/van_ucx/tests/test_van_ucx_contract
endif
endif

# kvtest jobs (tests/integration/job.sh, netns.sh) and pslite-server jobs
# (tests/integration/server_job.sh) over ucx
UCX_INTEGRATION_TESTS = \
	plugins/van_ucx/tests/ucx_tcp_data.sh plugins/van_ucx/tests/ucx_tcp_kill.sh \
	plugins/van_ucx/tests/ucx_tcp_soak.sh plugins/van_ucx/tests/ucx_tcp_hang.sh \
	plugins/van_ucx/tests/ucx_tcp_resend.sh \
	plugins/van_ucx/tests/ucx_shm_data.sh plugins/van_ucx/tests/ucx_shm_kill.sh \
	plugins/van_ucx/tests/ucx_shm_soak.sh \
	plugins/van_ucx/tests/ucx_shm_resend.sh \
	plugins/van_ucx/tests/ucx_busy_data.sh plugins/van_ucx/tests/ucx_caller_data.sh \
	plugins/van_ucx/tests/ucx_auto_data.sh \
	plugins/van_ucx/tests/ucx_tcp_netns.sh \
	plugins/van_ucx/tests/ucx_kill_big.sh plugins/van_ucx/tests/ucx_tcp_zfree.sh
UCX_SERVER_TESTS = plugins/van_ucx/tests/ucx_tcp_server_sync.sh \
	plugins/van_ucx/tests/ucx_tcp_server_async.sh \
	plugins/van_ucx/tests/ucx_tcp_server_bad.sh \
	plugins/van_ucx/tests/ucx_tcp_server_leftover.sh \
	plugins/van_ucx/tests/ucx_shm_server_sync.sh
# ucx_shm_hang.sh is not run: a server frozen by SIGSTOP can stop in the
# middle of writing into a peer's UCX shared-memory FIFO and wedge it for
# every sender (docs/van-ucx.md, "Known problem"); ucx_tcp_hang.sh covers the
# hung-server case over UCX.
EXTRA_DIST += plugins/van_ucx/van.m4 $(UCX_INTEGRATION_TESTS) $(UCX_SERVER_TESTS) \
	plugins/van_ucx/tests/ucx_mismatch.sh plugins/van_ucx/tests/ucx_shm_hang.sh \
	docs/van-ucx.md
if BUILD_VAN_UCX
TESTS += $(UCX_INTEGRATION_TESTS) $(UCX_SERVER_TESTS)
if BUILD_VAN_ZMQ
# a ucx node and a zmq (or fabric) scheduler, and the other way round
TESTS += plugins/van_ucx/tests/ucx_mismatch.sh
endif
endif

# exit codes after a lost node, a frozen server (tests/integration/exit_codes.sh,
# frozen.sh)
UCX_LOSS_TESTS = plugins/van_ucx/tests/ucx_tcp_exit.sh plugins/van_ucx/tests/ucx_tcp_frozen.sh \
	plugins/van_ucx/tests/ucx_tcp_secret.sh
EXTRA_DIST += $(UCX_LOSS_TESTS)
if BUILD_VAN_UCX
TESTS += $(UCX_LOSS_TESTS)
endif

# Attention-FFN batches (tests/integration/af_run.sh)
EXTRA_DIST += plugins/van_ucx/tests/af_ucx_tcp.sh plugins/van_ucx/tests/ipc_ucx_tcp.sh \
	plugins/van_ucx/tests/python_ucx_tcp.sh plugins/van_ucx/tests/ucx_tcp_groups.sh plugins/van_ucx/tests/ucx_tcp_inst.sh plugins/van_ucx/tests/ucx_tcp_joint.sh \
	plugins/van_ucx/tests/cuda_ucx_tcp.sh
if BUILD_VAN_UCX
TESTS += plugins/van_ucx/tests/af_ucx_tcp.sh plugins/van_ucx/tests/ipc_ucx_tcp.sh \
	plugins/van_ucx/tests/python_ucx_tcp.sh plugins/van_ucx/tests/ucx_tcp_groups.sh plugins/van_ucx/tests/ucx_tcp_inst.sh plugins/van_ucx/tests/ucx_tcp_joint.sh \
	plugins/van_ucx/tests/cuda_ucx_tcp.sh
endif

# ps-lite's C++ API in jobs of C++ programs (tests/cxx/cxx_job.sh) and its
# instance groups in one process (tests/cxx/cxx_group.sh)
EXTRA_DIST += plugins/van_ucx/tests/ucx_tcp_cxx.sh plugins/van_ucx/tests/ucx_tcp_cxx_group.sh
if BUILD_VAN_UCX
TESTS += plugins/van_ucx/tests/ucx_tcp_cxx.sh plugins/van_ucx/tests/ucx_tcp_cxx_group.sh
endif

# a lost node comes back (tests/integration/recovery.sh, docs/recovery.md)
UCX_RECOVERY_TESTS = plugins/van_ucx/tests/ucx_tcp_recovery_server.sh \
	plugins/van_ucx/tests/ucx_tcp_recovery_group.sh \
	plugins/van_ucx/tests/ucx_tcp_recovery_worker.sh plugins/van_ucx/tests/ucx_tcp_recovery_joint.sh \
	plugins/van_ucx/tests/ucx_tcp_recovery_inflight.sh plugins/van_ucx/tests/ucx_tcp_recovery_barrier.sh \
	plugins/van_ucx/tests/ucx_tcp_netns_cutoff.sh \
	plugins/van_ucx/tests/ucx_tcp_netns_ghost.sh plugins/van_ucx/tests/ucx_tcp_netns_taken.sh \
	plugins/van_ucx/tests/ucx_tcp_netns_worker.sh
EXTRA_DIST += $(UCX_RECOVERY_TESTS)
if BUILD_VAN_UCX
TESTS += $(UCX_RECOVERY_TESTS)
endif
