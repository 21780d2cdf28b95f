# van_ibverbs: build rules and tests (included by Makefile.am).
if BUILD_VAN_IBVERBS
pkglib_LTLIBRARIES += plugins/van_ibverbs/van_ibverbs.la
plugins_van_ibverbs_van_ibverbs_la_SOURCES = \
	plugins/van_ibverbs/van_ibverbs.c plugins/van_ibverbs/ibv.h \
	plugins/van_ibverbs/ibv_dev.c plugins/van_ibverbs/ibv_conn.c \
	plugins/van_ibverbs/ibv_xfer.c plugins/van_ibverbs/ibv_recv.c \
	plugins/van_ibverbs/ibv_pool.c plugins/van_ibverbs/ibv_progress.c \
	plugins/van_ibverbs/ibv_wire.c plugins/van_ibverbs/ibv_wire.h \
	plugins/van_ibverbs/ibv_cxx.c plugins/van_ibverbs/ibv_cxx.h \
	plugins/van_ibverbs/ibv_cxxio.c \
	plugins/van_ibverbs/ibv_logic.c plugins/van_ibverbs/ibv_logic.h \
	plugins/van_ibverbs/ibv_probe.c plugins/van_ibverbs/ibv_probe.h
plugins_van_ibverbs_van_ibverbs_la_CPPFLAGS = $(VAN_CPPFLAGS)
plugins_van_ibverbs_van_ibverbs_la_CFLAGS = $(AM_CFLAGS) $(IBVERBS_CFLAGS)
plugins_van_ibverbs_van_ibverbs_la_LIBADD = $(IBVERBS_LIBS)
plugins_van_ibverbs_van_ibverbs_la_LDFLAGS = $(VAN_LDFLAGS)
VAN_DIRS += $(abs_top_builddir)/plugins/van_ibverbs/.libs

# the wire records and the protocol logic (no hardware needed)
if HAVE_CMOCKA
check_PROGRAMS += plugins/van_ibverbs/tests/test_ibv_wire plugins/van_ibverbs/tests/test_ibv_logic \
	plugins/van_ibverbs/tests/test_ibv_probe
TESTS += plugins/van_ibverbs/tests/test_ibv_wire plugins/van_ibverbs/tests/test_ibv_logic \
	plugins/van_ibverbs/tests/test_ibv_probe
plugins_van_ibverbs_tests_test_ibv_wire_SOURCES = plugins/van_ibverbs/tests/test_ibv_wire.c \
	plugins/van_ibverbs/ibv_wire.c plugins/van_ibverbs/ibv_wire.h \
	plugins/van_ibverbs/ibv_cxx.c plugins/van_ibverbs/ibv_cxx.h
plugins_van_ibverbs_tests_test_ibv_wire_CPPFLAGS = $(VAN_CPPFLAGS) -I$(top_srcdir)/plugins/van_ibverbs
plugins_van_ibverbs_tests_test_ibv_wire_CFLAGS = $(TEST_CFLAGS)
plugins_van_ibverbs_tests_test_ibv_wire_LDADD = $(CMOCKA_LIBS)
plugins_van_ibverbs_tests_test_ibv_logic_SOURCES = plugins/van_ibverbs/tests/test_ibv_logic.c \
	plugins/van_ibverbs/ibv_logic.c plugins/van_ibverbs/ibv_logic.h
plugins_van_ibverbs_tests_test_ibv_logic_CPPFLAGS = $(VAN_CPPFLAGS) -I$(top_srcdir)/plugins/van_ibverbs
plugins_van_ibverbs_tests_test_ibv_logic_CFLAGS = $(TEST_CFLAGS)
plugins_van_ibverbs_tests_test_ibv_logic_LDADD = $(CMOCKA_LIBS)
# the TCP probe of a peer rdmacm cannot reach, against listeners on loopback
plugins_van_ibverbs_tests_test_ibv_probe_SOURCES = plugins/van_ibverbs/tests/test_ibv_probe.c \
	plugins/van_ibverbs/ibv_probe.c plugins/van_ibverbs/ibv_probe.h
plugins_van_ibverbs_tests_test_ibv_probe_CPPFLAGS = $(VAN_CPPFLAGS) -I$(top_srcdir)/plugins/van_ibverbs
plugins_van_ibverbs_tests_test_ibv_probe_CFLAGS = $(TEST_CFLAGS)
plugins_van_ibverbs_tests_test_ibv_probe_LDADD = $(CMOCKA_LIBS)
endif

# a stand-in for a C++ ps-lite RDMA node's connection set-up (the VM suite's cxx case)
check_PROGRAMS += plugins/van_ibverbs/tests/ibv_cxx_peer
plugins_van_ibverbs_tests_ibv_cxx_peer_SOURCES = plugins/van_ibverbs/tests/ibv_cxx_peer.c \
	plugins/van_ibverbs/ibv_cxx.c plugins/van_ibverbs/ibv_cxx.h
plugins_van_ibverbs_tests_ibv_cxx_peer_CPPFLAGS = $(VAN_CPPFLAGS) -I$(top_srcdir)/plugins/van_ibverbs
plugins_van_ibverbs_tests_ibv_cxx_peer_CFLAGS = $(AM_CFLAGS) $(IBVERBS_CFLAGS)
plugins_van_ibverbs_tests_ibv_cxx_peer_LDADD = $(IBVERBS_LIBS)
endif

# no device on this machine (ibv_host.sh), and the whole suite on real verbs
# in the soft-RoCE VM, one boot (ibv_vm.sh: tests/vm/run.sh; skips without it)
IBV_TESTS = plugins/van_ibverbs/tests/ibv_host.sh plugins/van_ibverbs/tests/ibv_vm.sh
VM_TESTS += plugins/van_ibverbs/tests/ibv_vm.sh
EXTRA_DIST += plugins/van_ibverbs/van.m4 $(IBV_TESTS) plugins/van_ibverbs/tests/ibv_vm_inner.sh \
	plugins/van_ibverbs/tests/ibv_vm_bench.sh docs/van-ibverbs.md
if BUILD_VAN_IBVERBS
TESTS += $(IBV_TESTS)
endif
