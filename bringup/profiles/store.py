"""Load and save profiles: safe YAML, one-line validation errors, locked atomic writes."""

import contextlib
import gc
import multiprocessing
import re
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import yaml
from filelock import FileLock, Timeout
from pydantic import ValidationError

from bringup import __version__
from bringup.errors import BringupError
from bringup.log import get_logger
from bringup.profiles.base_model import READ_FROM_FILE
from bringup.profiles.plain_yaml import AnchorFound, NeedsFullLoader, TooDeep, load_plain
from bringup.profiles.profile_file import NotAProfileFile, read_text, real_target, replace_text
from bringup.profiles.schema import SCHEMA_VERSION, DeviceSection, Profile, StageStamp, StageStatus

log = get_logger("profile")
LOCK_TIMEOUT_S = 60.0
# libyaml's safe loader/dumper are 5x faster on large profiles (thousands of op records); same safety.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # plain_yaml reads with the same one
SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
MAX_DEPTH = 64  # nesting levels of mappings and lists; bringup's own profiles use 9
PARALLEL_PARSE_BYTES = 16 << 20  # profiles this large together are parsed in parallel (load_profiles)


class DeviceLike(Protocol):
    id: str

    def to_dict(self) -> dict[str, Any]: ...


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def device_slug(device_id: str, name: str) -> str:
    text = f"{device_id}-{name}".lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:80]


def default_profile_path(info: DeviceLike) -> Path:
    name = info.to_dict().get("name", "")
    return Path.cwd() / "profiles" / f"{device_slug(info.id, name)}.yaml"


def printable(text: str) -> str:
    """`text` with each non-printable character (newline, CR, NUL, ESC, NEL ...) as its escape: one line, always."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def field_part(part: str | int) -> str:
    """One step of a field path: plain keys as they are, others quoted so escapes and dots show (`'a\\nb'`)."""
    if isinstance(part, int):
        return str(part)
    plain = bool(part) and part.isprintable() and "." not in part and part.strip() == part
    return part if plain else repr(part)


def field_path(loc: tuple[str | int, ...]) -> str:
    return ".".join(field_part(part) for part in loc) or "(document)"


def describe_validation_error(path: Path, error: ValidationError) -> str:
    first = error.errors()[0]
    more = len(error.errors()) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    got = first.get("input")
    got_text = f", got {str(got)[:60]!r}" if got is not None and not isinstance(got, dict | list) else ""
    return (
        f"profile {path}: field {field_path(first['loc'])}: {first['msg']}{got_text}{tail}; "
        "fix the file or re-run the stage"
    )


def loading_error(message: str) -> BringupError:
    """A profile-loading error, escaped to one line whatever the file name or content put into it."""
    return BringupError(printable(message))


def describe_yaml_error(path: Path, exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    position = getattr(exc, "position", None)  # a ReaderError has a character offset, not a mark
    if mark is not None:
        where = f" at line {mark.line + 1}, column {mark.column + 1}"
    else:
        where = f" at character {position + 1}" if isinstance(position, int) else ""
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or type(exc).__name__
    return f"profile {path} is not valid YAML{where}: {problem}; fix or delete the file"


def anchor_error(path: Path, kind: str, line: int, column: int) -> BringupError:
    return loading_error(
        f"profile {path} uses a YAML {kind} at line {line}, column {column}; profiles are plain data without "
        "anchors or aliases (&name, *name): write the values out, or re-run the stage"
    )


def refuse_anchors(path: Path, text: str) -> None:
    """A profile is plain data: an anchor (&name) or alias (*name) is refused before anything is built from it,
    so a small file cannot expand into gigabytes (the "billion laughs"). Scanning tokens costs ~0.1 s per MB,
    and only files holding `&` or `*` at all are scanned."""
    if "&" not in text and "*" not in text:
        return
    for token in yaml.scan(text, Loader=SAFE_LOADER):
        if isinstance(token, yaml.AnchorToken | yaml.AliasToken):
            kind = "anchor" if isinstance(token, yaml.AnchorToken) else "alias"
            raise anchor_error(path, kind, token.start_mark.line + 1, token.start_mark.column + 1)


def nesting_depth(document: Any) -> int:
    """Levels of mappings and lists in `document`, counted level by level (no recursion), stopping past MAX_DEPTH."""
    depth, level = 0, [document] if isinstance(document, dict | list) else []
    while level and depth <= MAX_DEPTH:
        depth += 1
        level = [child for node in level for child in (node.values() if isinstance(node, dict) else node)
                 if isinstance(child, dict | list)]
    return depth


def too_deep(path: Path, where: str = "") -> BringupError:
    return loading_error(f"profile {path} nests mappings or lists more than {MAX_DEPTH} levels deep{where}; "
                         "profiles are flat records (bringup writes at most 9): fix the file or re-run the stage")


def read_document(path: Path, text: str) -> Any:
    """The YAML document as plain data, built straight from the parser's events; the full safe loader (after the
    anchor scan) only for a document using tags, merge keys or complex keys."""
    try:
        return load_plain(text, MAX_DEPTH)
    except AnchorFound as exc:
        raise anchor_error(path, exc.kind, exc.line, exc.column) from None
    except TooDeep as exc:
        raise too_deep(path, f" (line {exc.line})") from None
    except NeedsFullLoader:
        pass
    refuse_anchors(path, text)
    document = yaml.load(text, Loader=SAFE_LOADER)
    if nesting_depth(document) > MAX_DEPTH:
        raise too_deep(path)
    return document


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Building a profile allocates millions of objects and no cycles; the cyclic collector, run on allocation
    counts, would sweep them again and again (a 70 MB profile's validation: 3.2 s with it, 0.7 s without)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_profile(path: Path, text: str) -> Profile:
    with collector_paused():
        return _validated(path, _document(path, text))


def _document(path: Path, text: str) -> dict[str, Any]:
    """The profile's YAML as plain data: a mapping of this bringup's schema version."""
    try:
        document = read_document(path, text)
    except yaml.YAMLError as exc:
        raise loading_error(describe_yaml_error(path, exc)) from None
    except RecursionError:
        raise too_deep(path) from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise loading_error(f"profile {path} holds a value that cannot be read ({str(exc)[:80]}); fix the file or "
                            "re-run the stage") from None
    if not isinstance(document, dict):
        raise loading_error(
            f"profile {path} must be a YAML mapping with a 'schema' key, got {type(document).__name__}; "
            "fix or delete the file"
        )
    schema = document.get("schema")
    if schema != SCHEMA_VERSION:
        raise loading_error(
            f"profile {path} has schema {repr(schema)[:80]}, this bringup reads {SCHEMA_VERSION!r}; "
            "re-run the stages into a new file, or pass --force to overwrite it"
        )
    return document


def _validated(path: Path, document: dict[str, Any]) -> Profile:
    try:
        return Profile.model_validate(document, context=READ_FROM_FILE)
    except ValidationError as exc:
        raise loading_error(describe_validation_error(path, exc)) from None


def load_profile(path: Path) -> Profile:
    return parse_profile(Path(path), _read(path))


def _read(path: Path) -> str:
    try:
        return read_text(Path(path))
    except FileNotFoundError:
        raise loading_error(f"profile {path} does not exist; run `bringup devices` or `bringup all` first") from None
    except NotAProfileFile as exc:
        raise loading_error(f"profile {path} {exc}; pass the path of a profile YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise loading_error(f"profile {path} cannot be read: {exc}") from None


def _document_of(path: Path) -> dict[str, Any]:
    with collector_paused():
        return _document(Path(path), _read(path))


def load_profiles(paths: list[Path]) -> list[Profile]:
    """Several profiles. Large ones are parsed in forked processes at once (parsing is most of reading a large
    profile: two of 71 MB take 10.6 s this way, 16 s one after the other), and validated here."""
    if len(paths) < 2 or sys.platform != "linux" or sum(_size(Path(p)) for p in paths) < PARALLEL_PARSE_BYTES:
        return [load_profile(p) for p in paths]
    with ProcessPoolExecutor(len(paths) - 1, mp_context=multiprocessing.get_context("fork")) as pool:
        parsing = [pool.submit(_document_of, p) for p in paths[1:]]
        first = load_profile(paths[0])
        with collector_paused():
            return [first, *(_validated(Path(p), future.result()) for p, future in zip(paths[1:], parsing))]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # reading it says why


def load_profile_or_none(path: Path) -> Profile | None:
    return load_profile(path) if Path(path).exists() else None


def same_device(recorded: DeviceSection, info: DeviceSection) -> bool:
    if recorded.id != info.id or recorded.backend != info.backend or recorded.name != info.name:
        return False
    for key in ("uuid", "pci_bus_id"):
        a, b = getattr(recorded, key), getattr(info, key)
        if a and b and a != b:
            return False
    return True


def check_identity(path: Path, profile: Profile, current: DeviceSection) -> None:
    recorded = profile.device
    if recorded is None or same_device(recorded, current):
        return
    raise BringupError(
        f"profile {path} was recorded for {recorded.id} ({recorded.name}), not {current.id} ({current.name}); "
        "use another --profile path, or --force to overwrite it"
    )


def unwritable(path: Path, exc: OSError | NotAProfileFile) -> BringupError:
    reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else f"it {exc}"
    return loading_error(f"cannot write profile {path}: {reason}; choose a writable --profile path")


def write_atomically(path: Path, text: str) -> None:
    """Through links to the real file, keeping its mode; a crash leaves the old file or the new one."""
    try:
        replace_text(Path(path), text)
    except (OSError, NotAProfileFile) as exc:
        raise unwritable(Path(path), exc) from None


def render_yaml(profile: Profile) -> str:
    return yaml.dump(profile.to_document(), Dumper=SAFE_DUMPER, sort_keys=False, allow_unicode=True, width=120)


def lock_for(path: Path) -> FileLock:
    """The lock beside the real file (two links to one profile share it)."""
    target = real_target(Path(path))
    lock_path = target.with_name(target.name + ".lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable(path, exc) from None
    return FileLock(str(lock_path), timeout=LOCK_TIMEOUT_S)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the profile's lock; a held lock or any OS error taking it (read-only file system, no space, a
    directory in its place) is one line."""
    lock = lock_for(path)
    try:
        lock.acquire()
    except Timeout:
        raise BringupError(
            f"profile {path} is locked by another bringup process (lock file {lock.lock_file}); wait for it, "
            "or remove the lock file if no bringup is running"
        ) from None
    except OSError as exc:
        raise unwritable(path, exc) from None
    try:
        yield
    finally:
        lock.release()


def load_for_update(path: Path, current: DeviceSection, force: bool) -> Profile:
    try:
        profile = load_profile_or_none(path)
    except BringupError as exc:
        if not force:
            raise
        log.warning("overwriting unreadable profile because of --force: %s", exc)
        return Profile()
    if profile is None:
        return Profile()
    try:
        check_identity(path, profile, current)
    except BringupError as exc:
        if not force:
            raise
        log.warning("starting a new profile because of --force: %s", exc)
        return Profile()
    return profile


def ensure_profile_matches(path: Path, info: DeviceLike, force: bool) -> None:
    """Fail before any work when the profile at `path` cannot take this device's results."""
    if force or not Path(path).exists():
        return
    check_identity(Path(path), load_profile(path), DeviceSection.model_validate(info.to_dict()))


def update_profile(
    path: Path,
    info: DeviceLike,
    mutate: Callable[[Profile], None],
    *,
    stage: str,
    status: StageStatus,
    force: bool = False,
    started: str | None = None,
) -> Profile:
    """Load (or start) the profile, check it belongs to this device, apply `mutate`, stamp, write atomically."""
    path = Path(path)
    current = DeviceSection.model_validate(info.to_dict())
    with locked(path):
        profile = load_for_update(path, current, force)
        profile.device = current
        mutate(profile)
        previous = profile.stages.get(stage)
        keep_start = previous is not None and previous.status == "partial" and started is None
        profile.stages[stage] = StageStamp(
            started=started or (previous.started if keep_start else now_iso()),
            finished=now_iso(),
            bringup=__version__,
            status=status,
        )
        checked = Profile.model_validate(profile.to_document())
        write_atomically(path, render_yaml(checked))
        return checked


def set_stage_level(path: Path, stage: str, level: int) -> None:
    """Record on `stage`'s stamp the `bringup all --level` it ran at (nothing when the stage left no stamp)."""
    with locked(path):
        profile = load_profile(path)
        stamp = profile.stages.get(stage)
        if stamp is None:
            return
        stamp.level = level
        write_atomically(path, render_yaml(Profile.model_validate(profile.to_document())))
