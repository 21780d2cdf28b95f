# PSL_VAN_CHECK(NAME, LABEL, PACKAGE-HINT, CHECK-COMMANDS)
# Adds --enable-van-NAME=auto|yes|no. CHECK-COMMANDS must set psl_have to
# yes or no. auto builds the van when its library is found; yes fails
# configure when it is not; no never builds it. Adds " NAME" to
# psl_vans_built, or " NAME (why)" to psl_vans_skipped, for the summary.
AC_DEFUN([PSL_VAN_CHECK], [
  AC_ARG_ENABLE([van-$1],
    [AS_HELP_STRING([--enable-van-$1=auto|yes|no], [build the $2 van (default: auto)])],
    [], [enable_van_$1=auto])
  AS_CASE([$enable_van_$1], [auto|yes|no], [],
    [AC_MSG_ERROR([--enable-van-$1=$enable_van_$1: expected auto, yes or no])])
  AS_IF([test "x$enable_van_$1" != xno], [
    psl_have=no
    $4
    AS_IF([test "x$psl_have" = xyes], [enable_van_$1=yes], [
      AS_IF([test "x$enable_van_$1" = xyes],
        [AC_MSG_ERROR([van $1 was requested (--enable-van-$1=yes) but $2 was not found: install $3, or use --enable-van-$1=auto])])
      enable_van_$1="no ($2 not found)"
    ])
  ])
  AS_IF([test "x$enable_van_$1" = xyes], [psl_vans_built="$psl_vans_built $1"],
    [test "x$enable_van_$1" = xno],
      [psl_vans_skipped="$psl_vans_skipped $1 (--enable-van-$1=no)"],
    [psl_vans_skipped="$psl_vans_skipped $1 ($2 not found: install $3)"])
  AM_CONDITIONAL(m4_toupper([BUILD_VAN_$1]), [test "x$enable_van_$1" = xyes])
])

# AX_PTHREAD_SIMPLE: -pthread for compile and link.
AC_DEFUN([AX_PTHREAD_SIMPLE], [
  AC_SEARCH_LIBS([pthread_create], [pthread], [], [AC_MSG_ERROR([pthreads not found])])
  PTHREAD_CFLAGS="-pthread"
  AC_SUBST([PTHREAD_CFLAGS])
])
