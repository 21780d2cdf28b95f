dnl van_fabric: configure check (pulled in by configure.ac).
PSL_VAN_CHECK([fabric], [libfabric 1.10+], [libfabric-dev],
  [PKG_CHECK_MODULES([FABRIC], [libfabric >= 1.10], [psl_have=yes], [psl_have=no])])
