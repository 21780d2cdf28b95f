dnl van_zmq: configure check (pulled in by configure.ac).
PSL_VAN_CHECK([zmq], [ZeroMQ], [libzmq3-dev],
  [PKG_CHECK_MODULES([ZMQ], [libzmq >= 4.1], [psl_have=yes], [psl_have=no])])
