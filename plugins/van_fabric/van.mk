# van_fabric: build rules and tests (included by Makefile.am).
if BUILD_VAN_FABRIC
pkglib_LTLIBRARIES += plugins/van_fabric/van_fabric.la
plugins_van_fabric_van_fabric_la_SOURCES = \
	plugins/van_fabric/van_fabric.c plugins/van_fabric/fabric.h \
	plugins/van_fabric/fab_boot.c plugins/van_fabric/fab_conn.c \
	plugins/van_fabric/fab_xfer.c plugins/van_fabric/fab_progress.c \
	plugins/van_fabric/fab_mrcache.c plugins/van_fabric/fab_mrcache.h \
	plugins/van_fabric/fab_pool.c \
	plugins/van_fabric/fab_proto.c plugins/van_fabric/fab_proto.h
plugins_van_fabric_van_fabric_la_CPPFLAGS = $(VAN_CPPFLAGS)
plugins_van_fabric_van_fabric_la_CFLAGS = $(AM_CFLAGS) $(FABRIC_CFLAGS)
plugins_van_fabric_van_fabric_la_LIBADD = $(FABRIC_LIBS)
plugins_van_fabric_van_fabric_la_LDFLAGS = $(VAN_LDFLAGS)
VAN_DIRS += $(abs_top_builddir)/plugins/van_fabric/.libs

# the memory registration cache and the wire records (no libfabric needed)
if HAVE_CMOCKA
check_PROGRAMS += plugins/van_fabric/tests/test_van_fabric_mrcache \
	plugins/van_fabric/tests/test_van_fabric_proto
TESTS += plugins/van_fabric/tests/test_van_fabric_mrcache \
	plugins/van_fabric/tests/test_van_fabric_proto
plugins_van_fabric_tests_test_van_fabric_mrcache_SOURCES = \
	plugins/van_fabric/tests/test_van_fabric_mrcache.c plugins/van_fabric/fab_mrcache.c
plugins_van_fabric_tests_test_van_fabric_mrcache_CPPFLAGS = $(VAN_CPPFLAGS) \
	-I$(top_srcdir)/plugins/van_fabric
plugins_van_fabric_tests_test_van_fabric_mrcache_CFLAGS = $(TEST_CFLAGS)
plugins_van_fabric_tests_test_van_fabric_mrcache_LDADD = $(CMOCKA_LIBS)
plugins_van_fabric_tests_test_van_fabric_proto_SOURCES = \
	plugins/van_fabric/tests/test_van_fabric_proto.c plugins/van_fabric/fab_proto.c
plugins_van_fabric_tests_test_van_fabric_proto_CPPFLAGS = $(VAN_CPPFLAGS) \
	-I$(top_srcdir)/plugins/van_fabric
plugins_van_fabric_tests_test_van_fabric_proto_CFLAGS = $(TEST_CFLAGS)
plugins_van_fabric_tests_test_van_fabric_proto_LDADD = $(CMOCKA_LIBS)
endif
endif

# kvtest jobs (tests/integration/job.sh, netns.sh) and pslite-server jobs
# (tests/integration/server_job.sh) over fabric
FABRIC_TESTS = plugins/van_fabric/tests/fabric_tcp_data.sh \
	plugins/van_fabric/tests/fabric_tcp_kill.sh \
	plugins/van_fabric/tests/fabric_tcp_soak.sh plugins/van_fabric/tests/fabric_tcp_mr.sh \
	plugins/van_fabric/tests/fabric_tcp_hang.sh plugins/van_fabric/tests/fabric_tcp_resend.sh \
	plugins/van_fabric/tests/fabric_sockets_data.sh \
	plugins/van_fabric/tests/fabric_errors.sh plugins/van_fabric/tests/fabric_tcp_netns.sh \
	plugins/van_fabric/tests/fabric_busy_data.sh plugins/van_fabric/tests/fabric_auto_data.sh \
	plugins/van_fabric/tests/fabric_tcp_joint.sh \
	plugins/van_fabric/tests/fabric_tcp_zfree.sh \
	plugins/van_fabric/tests/fabric_caller_data.sh plugins/van_fabric/tests/fabric_tcp_progress.sh
FABRIC_SERVER_TESTS = plugins/van_fabric/tests/fabric_tcp_server_sync.sh \
	plugins/van_fabric/tests/fabric_tcp_server_async.sh \
	plugins/van_fabric/tests/fabric_tcp_server_bad.sh \
	plugins/van_fabric/tests/fabric_tcp_server_leftover.sh
EXTRA_DIST += plugins/van_fabric/van.m4 $(FABRIC_TESTS) $(FABRIC_SERVER_TESTS) docs/van-fabric.md \
	bench/progress_fabric.sh
if BUILD_VAN_FABRIC
TESTS += $(FABRIC_TESTS) $(FABRIC_SERVER_TESTS)
endif

# exit codes after a lost node, a frozen server (tests/integration/exit_codes.sh,
# frozen.sh)
FABRIC_LOSS_TESTS = plugins/van_fabric/tests/fabric_tcp_exit.sh plugins/van_fabric/tests/fabric_tcp_frozen.sh \
	plugins/van_fabric/tests/fabric_tcp_secret.sh
EXTRA_DIST += $(FABRIC_LOSS_TESTS)
if BUILD_VAN_FABRIC
TESTS += $(FABRIC_LOSS_TESTS)
endif

# Attention-FFN batches (tests/integration/af_run.sh)
EXTRA_DIST += plugins/van_fabric/tests/af_fabric_tcp.sh plugins/van_fabric/tests/ipc_fabric_tcp.sh
if BUILD_VAN_FABRIC
TESTS += plugins/van_fabric/tests/af_fabric_tcp.sh plugins/van_fabric/tests/ipc_fabric_tcp.sh
endif

# ps-lite's C++ API in jobs of C++ programs (tests/cxx/cxx_job.sh)
EXTRA_DIST += plugins/van_fabric/tests/fabric_tcp_cxx.sh plugins/van_fabric/tests/fabric_tcp_cxx_group.sh
if BUILD_VAN_FABRIC
TESTS += plugins/van_fabric/tests/fabric_tcp_cxx.sh plugins/van_fabric/tests/fabric_tcp_cxx_group.sh
endif

# a lost node comes back (tests/integration/recovery.sh, docs/recovery.md)
FABRIC_RECOVERY_TESTS = plugins/van_fabric/tests/fabric_tcp_recovery_server.sh \
	plugins/van_fabric/tests/fabric_tcp_recovery_group.sh \
	plugins/van_fabric/tests/fabric_tcp_recovery_worker.sh plugins/van_fabric/tests/fabric_tcp_recovery_joint.sh \
	plugins/van_fabric/tests/fabric_tcp_recovery_inflight.sh \
	plugins/van_fabric/tests/fabric_tcp_recovery_barrier.sh \
	plugins/van_fabric/tests/fabric_tcp_netns_cutoff.sh \
	plugins/van_fabric/tests/fabric_tcp_netns_ghost.sh plugins/van_fabric/tests/fabric_tcp_netns_taken.sh \
	plugins/van_fabric/tests/fabric_tcp_netns_worker.sh
EXTRA_DIST += $(FABRIC_RECOVERY_TESTS)
if BUILD_VAN_FABRIC
TESTS += $(FABRIC_RECOVERY_TESTS)
endif
