"""The capability profile: one YAML document per device, one section per stage."""

from typing import Any, Literal

from pydantic import Field

from bringup.backends.device_info import DeviceInfo
from bringup.profiles.base_model import ProfileModel
from bringup.profiles.sections.bench import BenchSection
from bringup.profiles.sections.collectives import CollectivesSection
from bringup.profiles.sections.eval import EvalRecord
from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.profiles.sections.models import ModelPlanRecord
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord
from bringup.profiles.sections.selftest import SelftestSection
from bringup.profiles.sections.soak import SoakSection

SCHEMA_VERSION = "bringup.profile/v1"

CapabilityStatus = Literal["supported", "unsupported", "unknown"]
StageStatus = Literal["complete", "partial"]


# the device section is the record backends report (one type, fields listed once)
DeviceSection = DeviceInfo


class EnvironmentSection(ProfileModel):
    bringup: str
    torch: str
    python: str
    runtime: dict[str, str | None] = {}
    driver: str | None = None
    os: str
    env: dict[str, str] = {}
    captured: str | None = None
    # `name: value` facts per topic, added with `bringup env`; profiles recorded before it simply lack them
    torch_build: dict[str, str] = {}
    accelerators: dict[str, str] = {}
    compilers: dict[str, str] = {}
    packages: dict[str, str] = {}
    cpu: dict[str, str] = {}
    system: dict[str, str] = {}


class Capability(ProfileModel):
    status: CapabilityStatus
    evidence: str | None = None
    reason: str | None = None
    seconds: float | None = None
    details: dict[str, Any] = {}


class Capabilities(ProfileModel):
    dtypes: dict[str, Capability] = {}
    memory: dict[str, Capability] = {}
    attention: dict[str, Capability] = {}
    compile: dict[str, Capability] = {}
    features: dict[str, Capability] = {}
    # check id -> why the device family has no such thing (the backend's declared facts): the verdict skips these
    not_applicable: dict[str, str] = {}

    def groups(self) -> dict[str, dict[str, Capability]]:
        return {
            "dtypes": self.dtypes,
            "memory": self.memory,
            "attention": self.attention,
            "compile": self.compile,
            "features": self.features,
        }


class StageStamp(ProfileModel):
    started: str
    finished: str | None = None
    bringup: str
    status: StageStatus
    level: int | None = None  # the `bringup all --level` it ran at (None: run on its own, counted as 2)


class Profile(ProfileModel):
    schema_version: str = Field(SCHEMA_VERSION, alias="schema")
    device: DeviceSection | None = None
    environment: EnvironmentSection | None = None
    capabilities: Capabilities | None = None
    ops: list[OpCaseRecord] = []
    compiled: list[CompiledRecord] = []
    graph_replay: list[GraphReplayRecord] = []  # eager against graph replay (verify-ops --compiled)
    bench: BenchSection | None = None
    collectives: CollectivesSection | None = None
    selftest: SelftestSection | None = None
    soak: SoakSection | None = None
    eval: dict[str, EvalRecord] | None = None  # per model evaluated, keyed `name [short hash]`
    models: dict[str, ModelPlanRecord] | None = None  # per model tuned, keyed `name [short hash]`
    stages: dict[str, StageStamp] = {}

    def to_document(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
