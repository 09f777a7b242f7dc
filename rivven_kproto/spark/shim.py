"""The Java shim that makes Spark's literal ``format("kafka")`` resolve to ``kafka_py``.

The source (``java/src``) and its service registration (``java/resources``) ship with the
package; the jar is built from them with ``javac --release 17`` against the jars of the installed
PySpark, and zipped with :mod:`zipfile`, so neither Maven nor the ``jar`` tool is needed. The
built jar is package data (``jars/rivven-kproto-spark-shim.jar``) and records a digest of the
sources it was built from in its manifest; :func:`shim_jar` rebuilds it on first use when it is
missing or its digest differs from the sources (and a JDK is available).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import warnings
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
JAVA_DIR = HERE / "java"
JAR_NAME = "rivven-kproto-spark-shim.jar"
PACKAGED_JAR = HERE / "jars" / JAR_NAME
SHIM_CLASS = "io.rivven.kproto.spark.KafkaPythonSource"
_FIXED_TIME = (2024, 1, 1, 0, 0, 0)  # reproducible zip entries
_DIGEST_HEADER = "Rivven-Source-SHA256"


def spark_jars_dir() -> Path:
    """``$SPARK_HOME/jars``, or the jars shipped inside the pyspark package."""
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    if not jars.is_dir():
        raise FileNotFoundError(f"no Spark jars found (looked in $SPARK_HOME/jars and {jars})")
    return jars


def _sources() -> list[Path]:
    return [p for p in sorted((JAVA_DIR / "src").rglob("*")) + sorted((JAVA_DIR / "resources").rglob("*")) if p.is_file()]


def source_digest() -> str:
    """SHA-256 over the shim's source and resource files (names and contents)."""
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(path.relative_to(JAVA_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def jar_digest(jar: Path) -> str | None:
    """The source digest recorded in a jar's manifest (None when absent or unreadable)."""
    try:
        with zipfile.ZipFile(jar) as archive:
            manifest = archive.read("META-INF/MANIFEST.MF").decode()
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    for line in manifest.splitlines():
        if line.startswith(_DIGEST_HEADER + ": "):
            return line.split(": ", 1)[1].strip()
    return None


def _stale(jar: Path) -> bool:
    return not jar.exists() or not JAVA_DIR.exists() or jar_digest(jar) != source_digest()


def build_jar(out: Path = PACKAGED_JAR, *, javac: str | None = None) -> Path:
    """Compile the shim and write the jar to ``out``; returns ``out``."""
    javac = javac or shutil.which("javac")
    if javac is None:
        raise FileNotFoundError("javac (JDK 17+) is needed to build the Spark shim jar")
    classpath = str(spark_jars_dir() / "*")
    with tempfile.TemporaryDirectory() as tmp:
        classes = Path(tmp) / "classes"
        java_files = [str(p) for p in sorted((JAVA_DIR / "src").rglob("*.java"))]
        compiled = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", str(classes), *java_files],
            capture_output=True,
            text=True,
        )
        if compiled.returncode != 0:
            raise RuntimeError(f"javac failed building the Spark shim:\n{compiled.stdout}{compiled.stderr}")
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(".tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            manifest = f"Manifest-Version: 1.0\r\nCreated-By: rivven_kproto\r\n{_DIGEST_HEADER}: {source_digest()}\r\n\r\n"
            _add(jar, "META-INF/MANIFEST.MF", manifest.encode())
            for path in sorted(classes.rglob("*.class")):
                _add(jar, path.relative_to(classes).as_posix(), path.read_bytes())
            resources = JAVA_DIR / "resources"
            for path in sorted(p for p in resources.rglob("*") if p.is_file()):
                _add(jar, path.relative_to(resources).as_posix(), path.read_bytes())
        partial.replace(out)
    return out


def _add(jar: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, _FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    jar.writestr(info, data)


def shim_jar(*, build: bool = True) -> str:
    """Path of the shim jar, (re)building it when missing or built from other sources.

    The packaged jar is used as is when no sources ship alongside it or no JDK is available; a
    package directory that is not writable gets the jar built into ``~/.cache/rivven_kproto``.
    """
    if PACKAGED_JAR.exists() and (not JAVA_DIR.exists() or not _stale(PACKAGED_JAR)):
        return str(PACKAGED_JAR)
    if not build or shutil.which("javac") is None:
        if PACKAGED_JAR.exists():
            if JAVA_DIR.exists():
                warnings.warn(f"{PACKAGED_JAR} differs from its sources and no javac is available to rebuild it",
                              stacklevel=2)
            return str(PACKAGED_JAR)
        raise FileNotFoundError(f"{PACKAGED_JAR} is missing: run tools/build_spark_shim.py (needs javac 17+)")
    try:
        return str(build_jar(PACKAGED_JAR))
    except PermissionError:
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rivven_kproto" / JAR_NAME
        if _stale(cache):
            build_jar(cache)
        return str(cache)
