"""Where a Parquet dataset lives: a local folder, or a URI of a filesystem pyarrow opens
(``s3://bucket/prefix``). ``agentlog.dataset`` lists, reads and writes only through
``_Root``, so a URI works wherever a folder does, and an object store's refusal says what
to check.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import MissingDependencyError

_PART = "part-*.parquet"
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# What to check when an object store refuses or cannot be reached, per URI scheme.
_ACCESS = {
    "s3": "the credentials pyarrow finds (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
          "AWS_PROFILE), the region (AWS_REGION) and, for an S3-compatible server, its "
          "endpoint (AWS_ENDPOINT_URL)",
}



def _arrow() -> tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.dataset
    except ImportError as exc:
        raise MissingDependencyError(
            "a Parquet dataset needs pyarrow, which is not installed: "
            "pip install 'agentlog[arrow]'") from exc
    return pyarrow, pyarrow.dataset


def is_uri(location: object) -> bool:
    """Whether ``location`` is a URI (``s3://bucket/prefix``, ``file:///data/ds``) rather
    than a local path: a string that starts with a scheme and ``://``."""
    return isinstance(location, str) and _URI.match(location) is not None


@dataclass(frozen=True)
class _Root:
    """Where a dataset lives: its folder, and the pyarrow filesystem of a URI.

    A local path (``fs`` None) is listed with ``pathlib`` and read and written by pyarrow
    as a path; a URI goes through the filesystem ``pyarrow.fs.FileSystem.from_uri`` opens
    (a ``file://`` URI is its local path). Every listing, read and write of this module
    goes through here: an object store's refusal (credentials, endpoint) is an ``OSError``
    naming the URI and what to check; a local disk's error is raised as it is.
    """

    path: str  # the dataset's folder: a local path, or the path in ``fs``
    shown: str  # as given (a local path as ``Path`` prints it), for messages
    fs: Any = None  # the pyarrow filesystem of a URI; None: a local path

    def __str__(self) -> str:
        return self.shown

    @property
    def local(self) -> bool:
        return self.fs is None

    def join(self, *names: str) -> str:
        return "/".join([self.path, *names])

    @contextlib.contextmanager
    def _storage(self, doing: str) -> Iterator[None]:
        if self.local:
            yield
            return
        try:
            yield
        except OSError as exc:
            scheme = self.shown.split("://", 1)[0].lower()
            check = _ACCESS.get(scheme, f"the credentials and settings of {scheme}:// that "
                                        "pyarrow finds")
            raise OSError(f"{self}: cannot be {doing} ({exc}). Check {check}") from exc

    def _type(self, path: str) -> Any:
        with self._storage("read"):
            return self.fs.get_file_info(path).type

    def is_dir(self, path: str) -> bool:
        if self.local:
            return Path(path).is_dir()
        from pyarrow import fs

        return bool(self._type(path) == fs.FileType.Directory)

    def is_file(self, path: str) -> bool:
        """Whether something that is no folder is at ``path``."""
        if self.local:
            return Path(path).exists() and not Path(path).is_dir()
        from pyarrow import fs

        return bool(self._type(path) == fs.FileType.File)

    def files(self, folder: str, *, recursive: bool = True) -> list[str]:
        """The ``part-*.parquet`` files in ``folder`` (below it too, when ``recursive``),
        sorted as ``Path`` sorts them (by their names' parts); none without the folder."""
        if not self.is_dir(folder):
            return []
        if self.local:
            found = Path(folder).rglob(_PART) if recursive else Path(folder).glob(_PART)
            return [f"{folder}/{p.relative_to(folder).as_posix()}" for p in sorted(found)]
        from pyarrow import fs

        with self._storage("read"):
            listed = self.fs.get_file_info(fs.FileSelector(folder, recursive=recursive))
        names = [f.path for f in listed if f.type == fs.FileType.File
                 and fnmatch.fnmatchcase(f.base_name, _PART)]
        return sorted(names, key=lambda name: name[len(folder):].strip("/").split("/"))

    def schema(self, path: str) -> Any:
        import pyarrow.parquet as pq

        with self._storage("read"):
            return pq.read_schema(path, filesystem=self.fs)

    def read(self, path: str) -> Any:
        import pyarrow.parquet as pq

        with self._storage("read"):
            return pq.read_table(path, filesystem=self.fs)

    def scan(self, folder: str, columns: list[str] | None, filter: Any = None,
             **options: Any) -> Any:
        """``pyarrow.dataset.dataset(folder, ...)`` read (``columns`` of it, the rows
        ``filter`` keeps)."""
        import pyarrow.dataset as ds

        with self._storage("read"):
            return ds.dataset(folder, filesystem=self.fs, **options).to_table(
                columns=columns, filter=filter)

    def mkdir(self, folder: str) -> None:
        """A local folder and its parents (an object store has no folders: nothing)."""
        if self.local:
            Path(folder).mkdir(parents=True, exist_ok=True)

    def write(self, table: Any, path: str, **options: Any) -> None:
        import pyarrow.parquet as pq

        with self._storage("written"):
            pq.write_table(table, path, filesystem=self.fs, **options)

    def delete(self, path: str) -> None:
        if self.local:
            Path(path).unlink()
            return
        with self._storage("written"):
            self.fs.delete_file(path)

    def bucket(self) -> str | None:
        """An object store's bucket that does not exist (or that the credentials cannot
        see); None when it exists, or for a local path."""
        name = self.path.split("/", 1)[0]
        return None if self.local or self.is_dir(name) else name

    def not_a_dataset(self, found: str) -> ValueError:
        """The error of a location that holds no dataset (``found``: what it lacks)."""
        if self.local:
            return ValueError(
                f"{self}: not an agentlog Parquet dataset ({found}); write one with agentlog "
                "export TRACES --format parquet --out DIR")
        missing = self.bucket()
        if missing is not None:
            found = f"there is no bucket {missing!r}, or these credentials cannot see it"
        return ValueError(
            f"{self}: not an agentlog Parquet dataset ({found}); check the URI (its bucket "
            f"and prefix), or write one there with agentlog export TRACES --format parquet "
            f"--out {self}")


def _root(location: str | os.PathLike[str]) -> _Root:
    """The ``_Root`` of a dataset's folder or URI."""
    if not is_uri(location):
        shown = str(Path(location))
        return _Root(shown, shown)
    _arrow()
    from pyarrow import fs

    uri = str(location).rstrip("/")
    try:
        filesystem, path = fs.FileSystem.from_uri(uri)
    except (ValueError, OSError) as exc:  # an unknown scheme, or a filesystem not built in
        raise ValueError(
            f"{uri}: pyarrow cannot open this location ({exc}); give a local folder or a URI "
            "of a filesystem pyarrow has (s3://bucket/prefix, gs://, hdfs://, file://)"
        ) from None
    if isinstance(filesystem, fs.LocalFileSystem):  # file://: its path, as a local one
        return _Root(path, uri)
    return _Root(path.rstrip("/"), uri, filesystem)
