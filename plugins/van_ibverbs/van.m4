dnl van_ibverbs (DMLC_ENABLE_RDMA=ibverbs or 1): configure check (pulled in by configure.ac).
PSL_VAN_CHECK([ibverbs], [libibverbs and librdmacm], [libibverbs-dev librdmacm-dev],
  [PKG_CHECK_MODULES([IBVERBS], [libibverbs librdmacm], [psl_have=yes], [
     AC_CHECK_HEADERS([infiniband/verbs.h rdma/rdma_cma.h],
       [AC_CHECK_LIB([ibverbs], [ibv_get_device_list],
         [AC_CHECK_LIB([rdmacm], [rdma_create_id],
           [IBVERBS_CFLAGS=""; IBVERBS_LIBS="-lrdmacm -libverbs"; psl_have=yes],
           [psl_have=no])], [psl_have=no])],
       [psl_have=no])])])
AC_SUBST([IBVERBS_CFLAGS])
AC_SUBST([IBVERBS_LIBS])
