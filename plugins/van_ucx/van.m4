dnl van_ucx: configure check (pulled in by configure.ac).
dnl van_ucx needs UCP active messages with persistent data and rendezvous
dnl receive (ucp_am_send_nbx, ucp_am_recv_data_nbx) and am_alignment: 1.12+.
UCX_DEFS=""
PSL_VAN_CHECK([ucx], [UCX 1.12+], [libucx-dev],
  [PKG_CHECK_MODULES([UCX], [ucx >= 1.12], [psl_have=yes], [
     AC_CHECK_HEADER([ucp/api/ucp.h],
       [AC_CHECK_LIB([ucp], [ucp_am_send_nbx],
         [UCX_CFLAGS=""; UCX_LIBS="-lucp -lucs"; psl_have=yes], [psl_have=no], [-lucs])],
       [psl_have=no])])
   AS_IF([test "x$psl_have" = xyes], [
     psl_save_CFLAGS=$CFLAGS
     CFLAGS="$CFLAGS $UCX_CFLAGS"
     AC_MSG_CHECKING([whether UCX has the active message API van_ucx needs])
     AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <ucp/api/ucp.h>]], [[
         ucp_worker_params_t p;
         ucp_am_recv_param_t r;
         p.field_mask = UCP_WORKER_PARAM_FIELD_AM_ALIGNMENT;
         p.am_alignment = 8;
         r.recv_attr = UCP_AM_RECV_ATTR_FLAG_DATA | UCP_AM_RECV_ATTR_FLAG_RNDV;
         (void)p; (void)r;
         (void)ucp_am_send_nbx; (void)ucp_am_recv_data_nbx; (void)ucp_am_data_release;
         (void)ucp_worker_arm; (void)ucp_worker_get_efd;]])],
       [AC_MSG_RESULT([yes])],
       [AC_MSG_RESULT([no (UCX too old?)]); psl_have=no])
     CFLAGS=$psl_save_CFLAGS
     dnl sub-millisecond sleeps while UCX holds queued sends (glibc 2.35+);
     dnl passed on the van's command line (a van does not read config.h)
     AC_CHECK_FUNC([epoll_pwait2], [UCX_DEFS="-DHAVE_EPOLL_PWAIT2=1"])])])
AC_SUBST([UCX_DEFS])
