"""Give the op-case records of profiles their case id, keeping every other byte of the files (comments included).

    python scripts/migrate_op_case_ids.py reference/profiles/*.yaml

The rule (docs/stages/verify-ops.md, "Case identities"): a record of op O labelled L gets the id of the case of O
that the current catalog labels L; a record whose label no case has keeps no id (and is listed). Records of the
`ops` and `compiled` sections; a record that has an id already gets the one the rule gives now, so the script
can run again on any profile (after a profile is re-recorded or re-judged, say). verify-ops applies the same rule
to the profile it resumes or merges into; this script is for profiles kept as files, such as the reference ones.
Each file is checked after the edit: it reads back as before plus the ids, and loads as a profile.
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import yaml

SECTIONS = {"ops": "op", "compiled": "target"}
TOP_LEVEL = re.compile(r"^([A-Za-z_]+):")
RECORD_FIELD = re.compile(r"^(?:- |  )([a-z_]+):")


def record_ids(doc: dict, ids: dict[tuple[str, str], str]) -> tuple[dict, list[str]]:
    """(section -> [the id each record gets, or None]), the records no case has the label of."""
    wanted: dict = {}
    unmatched: list[str] = []
    for section, op_field in SECTIONS.items():
        wanted[section] = []
        for record in doc.get(section) or []:
            case = record.get("case")
            case_id = ids.get((record[op_field], case)) if case is not None else None
            if case is not None and case_id is None:
                unmatched.append(f"{section}: {record[op_field]} {record.get('dtype')} {case!r}")
            wanted[section].append(case_id)
    return wanted, unmatched


def with_ids(text: str, wanted: dict) -> str:
    """The text with `  case_id: ID` after the case of each record that gets an id, in place of any id there."""
    out: list[str] = []
    section, index, after_case = None, -1, False
    for line in text.split("\n"):
        top, field = TOP_LEVEL.match(line), RECORD_FIELD.match(line)
        if after_case and (top or field):
            after_case = False
            case_id = wanted[section][index]
            if case_id is not None:
                out.append(f"  case_id: {case_id}")
            if field and field.group(1) == "case_id" and line.startswith("  "):
                continue
        if top:
            section, index = top.group(1), -1
        if section in wanted and line.startswith("- "):
            index += 1
        if top or field:  # a case label wrapped over several lines ends at the next field
            after_case = section in wanted and bool(field) and field.group(1) == "case" and line.startswith("  ")
        out.append(line)
    return "\n".join(out)


def migrate(path: Path, ids: dict[tuple[str, str], str]) -> list[str]:
    """Write the ids into one profile file; the records left without one."""
    from bringup.profiles.store import load_profile

    text = path.read_text(encoding="utf-8")
    doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    wanted, unmatched = record_ids(doc, ids)
    expected = copy.deepcopy(doc)
    for section, case_ids in wanted.items():
        for record, case_id in zip(expected.get(section) or [], case_ids):
            record.pop("case_id", None)
            if case_id is not None:
                record["case_id"] = case_id
    new_text = with_ids(text, wanted)
    if yaml.load(new_text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) != expected:
        raise SystemExit(f"{path}: the edit would change more than the case ids; nothing written")
    path.write_text(new_text, encoding="utf-8")
    load_profile(path)
    return unmatched


def main(paths: list[str]) -> int:
    from bringup.probes.ops.catalog import case_ids_by_label, load_catalog

    if not paths:
        print("usage: python scripts/migrate_op_case_ids.py PROFILE.yaml ...", file=sys.stderr)
        return 2
    ids = case_ids_by_label(load_catalog())
    for name in paths:
        unmatched = migrate(Path(name), ids)
        print(f"{name}: case ids written; {len(unmatched)} record(s) whose label no case has")
        for line in unmatched:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
