"""A rank file's summary on disk (issue 57): `<rank file>.summary.json` beside the records
(auto.rank3.npz.summary.json beside auto.rank3.npz), written by `sm-profiler run` at the end of
each rank and by `sm-profiler summarize FILE` for older files; docs/format.md, "Rank summaries".

    {"summary_version": 1, "kind": "sm_profiler.rank_summary", "written_by": "sm_profiler 0.x",
     "records": {"file": "auto.rank3.npz", "bytes": 7812345, "members_sha256": "9f1c...",
                 "steps": [0, 1, 2]},
     ...}     what report/rank_summary.py's summarize() holds: the rank's launches, what its
              programs said of each, its own findings

A summary is of the records it names: their size and the digest of their zip directory (each
member's name, CRC-32 and size, which the zip stores: read without reading the columns) and
their steps. `stats DIR` and `advise DIR` check these against the file beside it and refuse a
summary that disagrees (a rank file written again after it), or one of another version (its
numbers are those its sm_profiler's analysis found: a version comes with each change of what they
mean), saying how to rebuild it. This module reads and writes the file; what it means is the report layer's.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile

import numpy as np

from ..errors import CaptureError
from ..text import number_runs
from .capture import read_column, shortened

# 2: advise's measures with R bounded by the kernel's registers and the full wave timed on the
# SMs the last wave left alone (issue 55); a summary of 1 holds the earlier numbers.
SUMMARY_VERSION = 2
SUMMARY_KIND = "sm_profiler.rank_summary"
SUFFIX = ".summary.json"
# A summary is kilobytes (its rank's launches, not its programs); past this it is not one.
MAX_SUMMARY_BYTES = 256 << 20


def summary_path(records: str | os.PathLike) -> str:
    """Where the summary of the rank file `records` lies: beside it, named after it."""
    return os.fspath(records) + SUFFIX


def rebuild(records: str) -> str:
    """The command that writes the summary of `records` again."""
    return f"sm-profiler summarize {records}"


def records_identity(records: str) -> dict:
    """What a summary says of its records: the file's name, its size in bytes and the sha256 of
    its zip directory (each member's name, CRC-32 and size, in order)."""
    try:
        size = os.stat(records).st_size
        with zipfile.ZipFile(records) as z:
            listing = "".join(f"{i.filename}\t{i.CRC:08x}\t{i.file_size}\n" for i in z.infolist())
    except (OSError, zipfile.BadZipFile) as e:
        raise CaptureError(f"cannot read {records!r} to check its summary: {e}") from e
    digest = hashlib.sha256(listing.encode()).hexdigest()
    return {"file": os.path.basename(records), "bytes": size, "members_sha256": digest}


def records_steps(records: str) -> list[int]:
    """The recorded steps of an auto file (its launch_step column's steps, sorted)."""
    try:
        with zipfile.ZipFile(records) as z:
            step = read_column(z, "launch_step", records, np.int64)
    except (OSError, zipfile.BadZipFile) as e:
        raise CaptureError(f"cannot read {records!r} to check its summary: {e}") from e
    return [int(s) for s in np.unique(step[step >= 0])]


def write_summary(records: str, doc: dict) -> str:
    """Write `doc` (report/rank_summary.summarize's) as the summary of `records`, naming them;
    returns its path. Written whole under a temporary name, then renamed."""
    from ..paths import atomic_output

    path = summary_path(records)
    head = {"summary_version": SUMMARY_VERSION, "kind": SUMMARY_KIND, "written_by": _writer()}
    ident = dict(records_identity(records), steps=doc.get("steps", []))
    text = json.dumps({**head, "records": ident, **doc}, separators=(",", ":"))
    with atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _writer() -> str:
    """'sm_profiler 0.1.0': the installed package's version (the package's root, which says it
    too, is a layer above this one)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"sm_profiler {version('sm_profiler')}"
    except PackageNotFoundError:  # a checkout run without installing it
        return "sm_profiler"


def read_summary(path: str, records: str | None = None) -> dict:
    """The summary at `path`, its version and kind checked; `records`: the rank file it should
    be of, checked against what it says of them (check_records). A CaptureError saying what is
    wrong and how to rebuild it otherwise."""
    records = records if records is not None else path[: -len(SUFFIX)]
    fix = f"rebuild it with `{rebuild(records)}`"
    try:
        if os.path.getsize(path) > MAX_SUMMARY_BYTES:
            raise CaptureError(
                f"{path} is {os.path.getsize(path):,} bytes, more than a summary holds "
                f"({MAX_SUMMARY_BYTES:,}): not a summary sm_profiler wrote; {fix}"
            )
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise CaptureError(
            f"cannot read the summary {path}: {shortened(str(e), 120)}; {fix}"
        ) from e
    version = doc.get("summary_version") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("kind") != SUMMARY_KIND or type(version) is not int:
        raise CaptureError(f"{path} is not a rank summary sm_profiler wrote; {fix}")
    if version > SUMMARY_VERSION:
        raise CaptureError(
            f"{path} is a summary of version {version}, newer than this sm_profiler reads "
            f"({SUMMARY_VERSION}): upgrade sm_profiler, or {fix}"
        )
    if version < SUMMARY_VERSION:  # its numbers are an earlier analysis's
        raise CaptureError(
            f"{path} is a summary of version {version}, made by an earlier sm_profiler (this one "
            f"reads {SUMMARY_VERSION}, whose numbers mean what they mean now): {fix}"
        )
    if os.path.exists(records):
        check_records(doc, path, records)
    return doc


def check_records(doc: dict, path: str, records: str) -> None:
    """A CaptureError where the summary `doc` (at `path`) is not of the rank file `records` as
    it is now: another size, another zip directory, other steps; saying which, and how to
    rebuild it."""
    said = doc.get("records")
    fix = f"the rank file was written again after its summary, or the summary is another's: {rebuild(records)}"
    if not isinstance(said, dict):
        raise CaptureError(f"{path} does not say which records it summarizes; {fix}")
    now = records_identity(records)
    name = os.path.basename(records)
    if said.get("bytes") != now["bytes"]:
        raise CaptureError(
            f"{path} disagrees with its records: it summarizes a file of "
            f"{_bytes_text(said.get('bytes'))} bytes, {name} has {now['bytes']:,}; {fix}"
        )
    if said.get("members_sha256") != now["members_sha256"]:
        raise CaptureError(
            f"{path} disagrees with its records: {name}'s columns are not those it summarizes "
            f"(their zip directory's sha256 differs); {fix}"
        )
    steps = records_steps(records)
    if said.get("steps") != steps or doc.get("steps") != steps:
        raise CaptureError(
            f"{path} disagrees with its records: it lists steps {_steps(doc.get('steps'))}, "
            f"{name} holds steps {_steps(steps)}; {fix}"
        )


def _bytes_text(v) -> str:
    return f"{v:,}" if type(v) is int else shortened(v, 40)


def _steps(v) -> str:
    if not isinstance(v, list) or not all(type(s) is int for s in v):
        return shortened(v, 40)
    return number_runs(v) if v else "none"
