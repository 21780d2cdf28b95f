"""The build backend of `pip install ./python` (PEP 517): the package is pure
Python, so the wheel is a zip of pslite/ and its metadata, built by the
standard library alone. No setuptools, nothing to download (pip's build
isolation installs nothing, so it works offline), and nothing written into
the source tree: the wheel goes where pip asks, straight from the sources."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "pslite"


def _version():
    with open(os.path.join(HERE, "pyproject.toml")) as f:
        return re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M).group(1)


def _sources():
    """(archive name, path) of every file of the package, sorted."""
    pkg = os.path.join(HERE, NAME)
    return [("%s/%s" % (NAME, n), os.path.join(pkg, n))
            for n in sorted(os.listdir(pkg)) if n.endswith(".py")]


def _metadata(version):
    with open(os.path.join(HERE, "pyproject.toml")) as f:
        desc = re.search(r'^description\s*=\s*"([^"]+)"', f.read(), re.M).group(1)
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\n"
            "License: Apache-2.0\nRequires-Python: >=3.8\n" % (NAME, version, desc))


def _wheel(wheel_directory, files):
    """A wheel of files ((archive name, bytes)) plus its dist-info."""
    version = _version()
    info = "%s-%s.dist-info" % (NAME, version)
    files = list(files) + [
        (info + "/METADATA", _metadata(version).encode()),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: pslite_build\n"
                          b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
        (info + "/top_level.txt", (NAME + "\n").encode())]
    record = []
    name = "%s-%s-py3-none-any.whl" % (NAME, version)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            z.writestr(arc, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append("%s,sha256=%s,%d" % (arc, digest.decode(), len(data)))
        record.append(info + "/RECORD,,")
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, [(arc, _read(p)) for arc, p in _sources()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """pip install -e ./python: a .pth file that puts this folder on sys.path."""
    return _wheel(wheel_directory, [(NAME + ".pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for arc in ["pyproject.toml", "pslite_build.py"] + [a for a, _ in _sources()]:
            t.add(os.path.join(HERE, arc), arcname=base + "/" + arc)
        pkg = _metadata(_version()).encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(pkg)
        t.addfile(ti, io.BytesIO(pkg))
    return name
