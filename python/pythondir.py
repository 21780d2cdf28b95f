"""Where `make install` puts the pslite package for the interpreter that runs
this (configure runs it with `python3 -E`, so PYTHONPATH does not count):

    python3 -E python/pythondir.py PREFIX [default]

prints the directory, `${prefix}` in place of PREFIX where it is under it,
and on stderr a line if the interpreter will not import from there. The
first of the interpreter's own install schemes (default, Debian's, posix,
venv) whose purelib directory is under PREFIX/lib and on its sys.path;
"default" (configure's prefix was not given): else the interpreter's own
purelib (a pyenv or venv interpreter with prefix /usr/local); else
PREFIX/lib/pythonX.Y/site-packages, which needs PYTHONPATH."""

import os
import site
import sys
import sysconfig


def _searched():
    real = os.path.realpath
    dirs = list(sys.path)
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # (virtualenv's old site.py)
        pass
    return {real(d) for d in dirs if d}


def _candidates(prefix):
    names = sysconfig.get_scheme_names()
    get_default = getattr(sysconfig, "get_default_scheme", None) or \
        getattr(sysconfig, "_get_default_scheme", lambda: "posix_prefix")
    order = [get_default(), "deb_system", "posix_prefix", "venv", "posix_local"]
    schemes = [s for i, s in enumerate(order) if s in names and s not in order[:i]]
    over = {"base": prefix, "platbase": prefix, "installed_base": prefix,
            "installed_platbase": prefix}
    for s in schemes:
        yield sysconfig.get_path("purelib", s, vars=over)
    for s in schemes:
        yield sysconfig.get_path("purelib", s)


def _under_lib(d, prefix):
    rel = os.path.relpath(os.path.realpath(d), os.path.realpath(prefix))
    return rel.split(os.sep)[0] == "lib"


def pythondir(prefix, default_prefix):
    """(directory, warning or None)"""
    searched = _searched()
    for d in _candidates(prefix):
        if _under_lib(d, prefix) and os.path.realpath(d) in searched:
            return d, None
    if default_prefix:
        return sysconfig.get_path("purelib"), None
    d = sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix})
    return d, ("%s does not import from %s: set PYTHONPATH=%s, or configure with "
               "--with-pythondir=DIR (one it searches: %s)"
               % (sys.executable, d, d, sysconfig.get_path("purelib")))


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: python3 -E pythondir.py PREFIX [default]\n")
        return 2
    prefix = argv[1].rstrip("/") or "/"
    d, warning = pythondir(prefix, argv[2:] == ["default"])
    if warning:
        sys.stderr.write(warning + "\n")
    if d == prefix or d.startswith(prefix.rstrip("/") + "/"):
        d = "${prefix}" + d[len(prefix):]
    print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
