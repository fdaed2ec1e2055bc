"""The fleet's result -- ranks, outliers, thresholds, faults -- and its file, fleet.json in the fleet folder."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bringup.bounded_file import FileRefused, read_bounded
from bringup.errors import BringupError
from bringup.probes.fleet.naming import FLEET_FILE
from bringup.probes.fleet.outliers import Outlier, Threshold, find_outliers
from bringup.probes.fleet.summary import RankSummary

MAX_RESULT_BYTES = 64 << 20  # fleet.json: a few KB a rank


@dataclass
class FleetFault:
    rank: int | None
    host: str
    kind: str               # exited | hung | startup | error | interrupted
    detail: str
    stage: str | None       # the stage the rank was in (None: before the first)
    culprit: bool = True    # False: a consequence of another rank's fault

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FleetResult:
    world_size: int
    launch: str                             # fork | spawn | torchrun
    nnodes: int
    seconds: float
    stages: list[str]
    ranks: list[RankSummary]
    faults: list[FleetFault] = field(default_factory=list)
    outliers: list[Outlier] = field(default_factory=list)
    thresholds: dict[str, Threshold] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    pids: dict[int, int] = field(default_factory=dict)    # rank -> pid (local runs; for the record and the tests)
    # the links' torch.distributed backend: backend, reason, data_path (device | host | host_staged), fallbacks
    collectives: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return bool(self.outliers)

    @property
    def link_unit(self) -> str:
        """The links' unit, with the path when their bytes do not travel the device's own way."""
        return "GB/s, host-staged" if self.collectives.get("data_path") == "host_staged" else "GB/s"

    def to_dict(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "launch": self.launch, "nnodes": self.nnodes,
                "seconds": round(self.seconds, 3), "stages": self.stages,
                "ranks": [r.to_dict() for r in self.ranks],
                "outliers": [o.to_dict() for o in self.outliers],
                "thresholds": {k: t.to_dict() for k, t in self.thresholds.items()},
                "faults": [f.to_dict() for f in self.faults], "options": self.options,
                "pids": {str(k): v for k, v in self.pids.items()}, "collectives": self.collectives}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FleetResult:
        return cls(world_size=data["world_size"], launch=data["launch"], nnodes=data["nnodes"],
                   seconds=data["seconds"], stages=list(data["stages"]),
                   ranks=[RankSummary.from_dict(r) for r in data["ranks"]],
                   faults=[FleetFault(**f) for f in data.get("faults", [])],
                   outliers=[Outlier(**o) for o in data.get("outliers", [])],
                   thresholds={k: Threshold(**t) for k, t in data.get("thresholds", {}).items()},
                   options=data.get("options", {}),
                   pids={int(k): int(v) for k, v in data.get("pids", {}).items()},
                   collectives=dict(data.get("collectives") or {}))


def judge(result: FleetResult, k: float, min_deviation: float, link_min_deviation: float | None = None
          ) -> FleetResult:
    """Fill in the outliers and thresholds; a rank that died or hung is an outlier of kind `fault`."""
    outliers, thresholds = find_outliers(result.ranks, k, min_deviation, link_min_deviation)
    for fault in result.faults:
        if fault.culprit and fault.rank is not None:
            where = f" (stage {fault.stage})" if fault.stage else ""
            outliers.append(Outlier(fault.rank, fault.host, "fault", f"{fault.kind}{where}: {fault.detail}",
                                    {"fault": fault.kind, "stage": fault.stage}))
    outliers.sort(key=lambda o: (o.rank, o.kind))
    result.outliers, result.thresholds = outliers, thresholds
    return result


def write_result(result: FleetResult, out_dir: Path) -> Path:
    """fleet.json in the fleet folder, written atomically (temp file + rename)."""
    from bringup.profiles.store import write_atomically

    path = Path(out_dir) / FLEET_FILE
    write_atomically(path, json.dumps(result.to_dict(), indent=1) + "\n")
    return path


def load_result(folder: Path) -> FleetResult:
    path = Path(folder) / FLEET_FILE
    try:
        text = read_bounded(path, MAX_RESULT_BYTES).decode("utf-8")
        return FleetResult.from_dict(json.loads(text))
    except FileRefused as exc:
        raise BringupError(f"the fleet result {path} {exc}; run `bringup fleet --out {folder}` again") from None
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise BringupError(f"cannot read the fleet result {path}: {exc}; run `bringup fleet --out "
                           f"{folder}` again") from None
