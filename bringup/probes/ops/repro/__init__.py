"""Reproducers: one standalone torch-only Python file per failing op case or compiled comparison, plus an index.

`write_reproducer_dir(records, out_dir, device)` writes them (verify-ops --repro-dir);
`write_reproducers(profile_path, out_dir)` does the same from a profile's `ops` and `compiled` records (bringup all).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bringup.errors import BringupError
from bringup.probes.ops.catalog import load_catalog
from bringup.probes.ops.repro.extract import NotExpressible
from bringup.probes.ops.repro.source import reproducer_source
from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord, VerifyOpsRecord
from bringup.profiles.store import load_profile

INDEX_NAME = "README.md"
MARKER = "(bringup-reproducer)"  # in every file written here: only such files are removed as stale
MAX_STEM = 100


@dataclass
class ReproResult:
    directory: Path
    written: list[Path] = field(default_factory=list)
    not_written: list[tuple[str, str]] = field(default_factory=list)  # (what, why)
    index: Path | None = None

    def line(self) -> str:
        text = f"reproducers: {len(self.written)} written to {self.directory}"
        if self.not_written:
            text += f", {len(self.not_written)} not expressible standalone (see {INDEX_NAME})"
        return text


def title_of(record: VerifyOpsRecord) -> str:
    if isinstance(record, OpCaseRecord):
        return f"{record.op}[{record.dtype}] {record.case}"
    case = f" {record.case}" if record.case else ""
    return f"compiled {record.target}[{record.dtype}]{case} backend={record.backend}"


def _sanitise(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9.+=-]", "_", text)).strip("_.") or "case"


def file_stem(record: VerifyOpsRecord) -> str:
    """`<op>-<dtype>-<case>`, or `<target>-<dtype>-compiled-<backend>[-<case>]`, safe as a file name."""
    if isinstance(record, OpCaseRecord):
        parts = [record.op, record.dtype, record.case]
    else:
        parts = [record.target, record.dtype, f"compiled-{record.backend}", *([record.case] if record.case else [])]
    return "-".join(_sanitise(p) for p in parts)[:MAX_STEM]


def _unique_names(records: list[VerifyOpsRecord]) -> list[str]:
    """File names, with a checksum of the full title where two records would share one."""
    stems = [file_stem(r) for r in records]
    names = []
    for stem, record in zip(stems, records):
        if stems.count(stem) > 1:
            stem = f"{stem}-{zlib.crc32(title_of(record).encode()):08x}"
        names.append(f"{stem}.py")
    return names


def failing_records(records: Iterable[VerifyOpsRecord]) -> list[VerifyOpsRecord]:
    """Op cases that fail, error, crash or time out, and failing compiled comparisons, in a stable order."""
    chosen = [r for r in records if r.failing and not isinstance(r, GraphReplayRecord)]  # replay: no standalone
    return sorted(chosen, key=lambda r: (isinstance(r, CompiledRecord), title_of(r)))


def check_directory(out_dir: Path) -> Path:
    """The directory, created if missing; BringupError (one line, exit 2) when it cannot be one."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise BringupError(f"--repro-dir {out_dir} exists and is not a directory; give a directory path")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BringupError(f"cannot create reproducer directory {out_dir}: {exc.strerror or exc}; "
                           "choose a writable path") from None
    return out_dir


def write_text_atomically(path: Path, text: str) -> None:
    """Temp file in the same directory, then rename: a reader sees the old file or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _first_line(record: VerifyOpsRecord) -> str:
    message = " ".join((record.message or "").split())
    return f"{record.status}: {message[:200]}" if message else record.status


def _index_text(result: ReproResult, summaries: dict[Path, str], device: str) -> str:
    lines = [
        "# Reproducers from bringup verify-ops", "",
        f"Device: `{device}`. Each file needs only torch: `python FILE [--device DEV]` prints the error figures "
        "and exits 1 while the defect is there, 0 once fixed (judged as verify-ops judges it), 2 when it "
        "cannot run here.", "",
    ]
    if result.written:
        lines += [f"- `{path.name}` — {summaries[path]}" for path in result.written]
    else:
        lines.append("No failing case: nothing to reproduce.")
    if result.not_written:
        lines += ["", "## Not written: no faithful standalone form", ""]
        lines += [f"- {what} — {why}" for what, why in result.not_written]
    return "\n".join(lines) + "\n"


def _remove_stale(out_dir: Path, keep: set[Path]) -> None:
    """Reproducers an earlier run wrote here (they carry MARKER) whose case no longer fails."""
    for path in out_dir.glob("*.py"):
        if path in keep:
            continue
        with contextlib.suppress(OSError):
            with path.open(encoding="utf-8", errors="replace") as fh:
                head = fh.read(2000)
            if MARKER in head:
                path.unlink()


def write_reproducer_dir(records: Iterable[VerifyOpsRecord], out_dir: Path, device: str) -> ReproResult:
    """One verified standalone file per failing record, the index, stale files of earlier runs removed."""
    out_dir = check_directory(out_dir)
    chosen = failing_records(records)
    result = ReproResult(out_dir)
    summaries: dict[Path, str] = {}
    catalog = load_catalog()
    for record, name in zip(chosen, _unique_names(chosen)):
        try:
            text = reproducer_source(record, catalog, device, title_of(record), name)
        except (NotExpressible, KeyError) as exc:
            result.not_written.append((title_of(record), str(exc).strip("'\"")))
            continue
        except Exception as exc:  # a bug in the extraction must not cost the verify-ops run its results
            result.not_written.append((title_of(record), f"could not be generated ({type(exc).__name__}: {exc})"))
            continue
        path = out_dir / name
        try:
            write_text_atomically(path, text)
        except OSError as exc:
            raise BringupError(f"cannot write reproducer {path}: {exc.strerror or exc}; choose a writable "
                               "--repro-dir") from None
        result.written.append(path)
        summaries[path] = f"{title_of(record)} — {_first_line(record)}"
    _remove_stale(out_dir, set(result.written))
    result.index = out_dir / INDEX_NAME
    write_text_atomically(result.index, _index_text(result, summaries, device))
    return result


def write_reproducers(profile_path: Path, out_dir: Path) -> list[Path]:
    """Reproducers for the failing `ops` and `compiled` records of a profile; the files written (index last)."""
    profile = load_profile(Path(profile_path))
    device = profile.device.id if profile.device is not None else "cpu"
    result = write_reproducer_dir([*profile.ops, *profile.compiled], out_dir, device)
    return [*result.written, *([result.index] if result.index else [])]
