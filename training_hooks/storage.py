"""Where runs live: a local folder or an object store (``s3://``, ``gs://``), one set of operations.

A runs root (and every path below it) is either a local path or a URI that ``pyarrow.fs`` opens
(``s3://bucket/prefix``, ``gs://bucket/prefix``); credentials and endpoint come from the standard
environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_DEFAULT_REGION``, ``AWS_PROFILE``; ``GOOGLE_APPLICATION_CREDENTIALS``). What each operation
does where:

- ``atomic_path`` / ``write_bytes``: locally, write a hidden temporary file beside the target,
  fsync it and rename it over the target. On an object store there is no rename: the content is
  staged in a local temporary file and uploaded whole (one PUT, or a multipart upload for large
  objects); the object appears when the upload completes, so a reader sees the old object or the
  new one, never half of one. The uploaded size is checked before the call returns.
- ``makedirs``: a local folder; on an object store folders are prefixes (nothing to create) and
  only a missing bucket is created.
- ``list_files`` / ``list_tree``: ``os.scandir`` locally; one paginated listing of the prefix on an
  object store (``list_tree``: every object below it, in one listing).

Object stores give modification times to the second (S3's ``LastModified``): two writes of the
same size within one second would share a (size, mtime) stamp. ``FileStamp`` therefore stamps an
object modified within ``SETTLE_S`` seconds of the listing with the listing's time, so a reader
that caches on (name, size, mtime) reads a just-written object again until its stamp settles.

Torch-free; pyarrow is imported when an object store is first used.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any, NamedTuple, TypeGuard

_URI_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")
#: Objects modified less than this long before a listing get the listing's time as their stamp.
SETTLE_S = 2.0
#: Objects up to this size are read in one GET (a Parquet reader would issue several).
WHOLE_READ_BYTES = 8 << 20
_CHUNK = 8 << 20


class FileStamp(NamedTuple):
    """A file as listed: its name (relative to the listed folder, "/"-separated), size and
    modification time: what a read of it depends on, so also a cache key."""

    name: str
    size: int
    mtime_ns: int


def is_uri(path: object) -> TypeGuard[str]:
    """True for an object-store URI (``s3://...``, ``gs://...``); ``file://`` and plain paths are
    local."""
    if not isinstance(path, str):
        return False
    m = _URI_RE.match(path)
    return m is not None and m.group(1).lower() != "file"


def local(path: str | os.PathLike) -> str:
    """A local path as a string (a ``file://`` prefix removed)."""
    p = os.fspath(path)
    return p[len("file://") :] if p.startswith("file://") else p


def join(base: str | os.PathLike, *names: str) -> str:
    """``base/name/...``: "/" on object stores, ``os.path.join`` locally."""
    if is_uri(base):
        return "/".join([str(base).rstrip("/"), *(n.strip("/") for n in names)])
    return os.path.join(local(base), *names)


def basename(path: str | os.PathLike) -> str:
    """The last component of a path or URI (a trailing "/" ignored)."""
    p = os.fspath(path)
    return p.rstrip("/").rsplit("/", 1)[-1] if is_uri(p) else os.path.basename(os.path.normpath(p))


# ----------------------------------------------------------------------------- filesystems

_FILESYSTEMS: dict[tuple, Any] = {}
_FS_LOCK = threading.Lock()
_ENV_KEYS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_DEFAULT_REGION")


def resolve(uri: str) -> tuple[Any, str]:
    """``(pyarrow filesystem, path inside it)`` of an object-store URI; one filesystem per scheme,
    bucket and endpoint, built once (``FileSystem.from_uri``: the environment's credentials and
    ``AWS_ENDPOINT_URL``). S3 objects are written with ``allow_delayed_open`` (an object smaller
    than a multipart part is one PUT) and a missing bucket may be created."""
    m = _URI_RE.match(uri)
    if m is None:
        raise ValueError(f"{uri!r} is not an object-store URI (scheme://bucket/path)")
    scheme, rest = m.group(1).lower(), m.group(2)
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"{uri!r} names no bucket")
    cache_key = (scheme, bucket, *(os.environ.get(k) for k in _ENV_KEYS))
    with _FS_LOCK:
        fs = _FILESYSTEMS.get(cache_key)
        if fs is None:
            from pyarrow import fs as pafs

            options = (
                "?allow_delayed_open=true&allow_bucket_creation=true" if scheme == "s3" else ""
            )
            fs, _ = pafs.FileSystem.from_uri(f"{scheme}://{bucket}{options}")
            _FILESYSTEMS[cache_key] = fs
    return fs, f"{bucket}/{key}".rstrip("/")


# ----------------------------------------------------------------------------- queries


def _type(path: str) -> str:
    """The name of an object-store path's pyarrow ``FileType`` ("NotFound", "File", "Directory"):
    this module compares types by name, so it imports no ``pyarrow.fs`` for them."""
    fs, p = resolve(path)
    return fs.get_file_info(p).type.name


def exists(path: str | os.PathLike) -> bool:
    """A file or folder (on an object store: an object, or a prefix holding objects)."""
    if is_uri(path):
        return _type(path) != "NotFound"
    return os.path.exists(local(path))


def is_file(path: str | os.PathLike) -> bool:
    if is_uri(path):
        return _type(path) == "File"
    return os.path.isfile(local(path))


def is_dir(path: str | os.PathLike) -> bool:
    """A folder (on an object store: a prefix holding objects, or a bucket)."""
    if is_uri(path):
        return _type(path) == "Directory"
    return os.path.isdir(local(path))


def _stamp(info, name: str, now_ns: int) -> FileStamp:
    mtime = info.mtime_ns or 0
    if now_ns - mtime < SETTLE_S * 1e9:  # not settled: second-resolution mtimes may repeat
        mtime = now_ns
    return FileStamp(name, int(info.size or 0), int(mtime))


def _remote_listing(folder: str, recursive: bool) -> list:
    """``FileInfo`` of the entries below an object-store prefix ([] when there is none)."""
    from pyarrow.fs import FileSelector

    fs, p = resolve(folder)
    try:
        return fs.get_file_info(FileSelector(p, recursive=recursive, allow_not_found=True))
    except FileNotFoundError:
        return []


def list_files(folder: str | os.PathLike) -> list[FileStamp]:
    """The files directly in ``folder`` (not sub-folders), by name; [] when it does not exist."""
    if is_uri(folder):
        return list_tree(folder, recursive=False)
    out = []
    try:
        entries = list(os.scandir(local(folder)))
    except (FileNotFoundError, NotADirectoryError):
        return []
    for e in entries:
        try:
            if not e.is_file():
                continue
            st = e.stat()
        except FileNotFoundError:  # replaced meanwhile
            continue
        out.append(FileStamp(e.name, st.st_size, st.st_mtime_ns))
    return sorted(out)


def list_tree(folder: str, *, recursive: bool = True) -> list[FileStamp]:
    """Every object below an object-store prefix, named relative to it ("run/steps/part-..."),
    sorted: one paginated listing. ([] when the prefix holds nothing.)"""
    _, base = resolve(folder)
    now_ns = time.time_ns()
    out = []
    for info in _remote_listing(folder, recursive):
        if info.type.name == "File":
            out.append(_stamp(info, info.path[len(base) + 1 :], now_ns))
    return sorted(out)


def list_dirs(folder: str | os.PathLike) -> list[str]:
    """Names of the sub-folders of ``folder`` (not starting with "."), sorted; [] when missing."""
    if is_uri(folder):
        infos = _remote_listing(folder, recursive=False)
        names = [basename(i.path) for i in infos if i.type.name == "Directory"]
    else:
        try:
            names = [e.name for e in os.scandir(local(folder)) if e.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            return []
    return sorted(n for n in names if not n.startswith("."))


# ----------------------------------------------------------------------------- reads


def read_bytes(path: str | os.PathLike) -> bytes:
    """The whole file; ``FileNotFoundError`` when it does not exist."""
    if is_uri(path):
        fs, p = resolve(path)
        with fs.open_input_stream(p) as f:
            return f.read()
    with open(local(path), "rb") as f:
        return f.read()


def open_input(path: str | os.PathLike, size: int | None = None):
    """Something ``pyarrow.parquet`` reads: the local path itself, an object read whole in one GET
    when ``size`` says it is small, else a random-access handle (``size``: from a listing)."""
    if not is_uri(path):
        return local(path)
    fs, p = resolve(path)
    if size is not None and size <= WHOLE_READ_BYTES:
        import pyarrow as pa

        with fs.open_input_stream(p) as f:
            return pa.BufferReader(f.read_buffer())
    return fs.open_input_file(p)


# ----------------------------------------------------------------------------- writes


def makedirs(path: str | os.PathLike) -> None:
    """A local folder and its parents; on an object store, the bucket if it is missing."""
    if is_uri(path):
        fs, p = resolve(path)
        bucket = p.split("/", 1)[0]
        if fs.get_file_info(bucket).type.name == "NotFound":
            fs.create_dir(bucket, recursive=False)
        return
    os.makedirs(local(path), exist_ok=True)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a local temporary name to write ``path``'s content to; on success publish it whole
    (locally: fsync and rename over ``path``; object store: one upload), on failure remove it.

        with atomic_path(final) as tmp:
            pq.write_table(table, tmp)
    """
    if is_uri(path):
        fd, tmp = tempfile.mkstemp(prefix="gspo-dash-upload-", suffix="-" + basename(path))
        os.close(fd)
        try:
            yield tmp
            upload_file(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return
    folder, base = os.path.split(local(path))
    tmp = os.path.join(folder, f".tmp-{os.getpid()}-{threading.get_ident()}-{base}")
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, local(path))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def upload_file(local_file: str, uri: str) -> None:
    """Upload a local file as one object. Up to ``_CHUNK`` bytes it is one PUT of content already
    complete (a failed PUT leaves no object); larger files go up in parts, and the object's size
    is checked afterwards (a short object is deleted and reported)."""
    fs, p = resolve(uri)
    size = os.path.getsize(local_file)
    with open(local_file, "rb") as src:
        if size <= _CHUNK:
            data = src.read()
            with fs.open_output_stream(p) as out:
                out.write(data)
            return
        out = fs.open_output_stream(p)
        shutil.copyfileobj(src, out, _CHUNK)
        out.close()
    got = fs.get_file_info(p).size
    if got != size:
        with contextlib.suppress(OSError):
            fs.delete_file(p)
        raise OSError(f"upload of {uri} incomplete: {got} of {size} bytes")


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` as the whole file: atomically (see ``atomic_path``)."""
    if is_uri(path):
        fs, p = resolve(str(path))
        with fs.open_output_stream(p) as out:  # one PUT of complete content (small files)
            out.write(data)
        return
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def delete(path: str | os.PathLike) -> None:
    """Remove one file; a missing file is not an error."""
    if is_uri(path):
        fs, p = resolve(str(path))
        with contextlib.suppress(FileNotFoundError):
            fs.delete_file(p)
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(local(path))


def download_tree(uri: str, dest: str) -> None:
    """Copy every object below ``uri`` into the local folder ``dest`` (same relative names)."""
    for f in list_tree(uri):
        target = os.path.join(dest, *f.name.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as out:
            out.write(read_bytes(join(uri, f.name)))
