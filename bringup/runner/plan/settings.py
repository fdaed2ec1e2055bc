"""The execution plan's settings, each named once (plain data; its one import is the attention kinds' names): the
plan's rows, a tune record, `bringup tune`'s summary, the confirmation on the served model, the report's draft and
`bringup all`'s plan line read this table. ExecutionPlan (plan.py) holds one Choice field per entry;
tests/runner/test_plan_settings.py keeps them the same. A setting's name is also its key wherever a profile stores the
plan (a tune record's `plan`, the e2e bench's).
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.profiles.attention_kinds import PAGED_DECODE


@dataclass(frozen=True)
class Setting:
    name: str  # the ExecutionPlan field
    short: str = ""  # what `bringup all`'s plan line calls it ("": its name)
    quiet: str | None = None  # the value `bringup all`'s plan line leaves out: nothing to say
    drafted: bool = True  # shown in the report's draft from the profile alone (False: start-up measures or sizes it)
    tune_line: int | None = None  # start-up measures it, so a tune record decides it: its line in tune's summary
    candidate: str | None = None  # what confirm.py times on the served model against its plain path to decide it
    candidate_order: int = 0  # the candidate's place in confirm.py's order


SETTINGS = (  # in the order of the plan's rows
    Setting("dtype"),
    Setting("attention", tune_line=2, candidate=PAGED_DECODE, candidate_order=2),
    Setting("compiled", tune_line=3, candidate="compiled", candidate_order=1),
    Setting("decode_layers", quiet="modules", tune_line=4, candidate="fused", candidate_order=5),
    Setting("prompt_layers", quiet="modules", drafted=False),  # timed at start-up on a prompt (startup/prompt.py)
    Setting("experts", quiet="none", tune_line=5, candidate="experts", candidate_order=4),
    Setting("graphs", quiet="off", drafted=False),  # decode steps replayed from captured graphs (engine/graphs/)
    Setting("weight_layout", short="weights", drafted=False, tune_line=1, candidate="weight_layout",
            candidate_order=3),
    Setting("quantization"),
    Setting("kv_blocks", short="kv", drafted=False),
    Setting("max_model_len"),
    Setting("max_num_seqs", tune_line=6),
    Setting("max_num_batched_tokens", short="batch_tokens"),
    Setting("prefix_caching", short="prefix_cache", quiet="on", drafted=False),
    Setting("prefill_chunk", drafted=False),
    Setting("mixed_steps", short="mixed", quiet="one forward", drafted=False),  # timed at start-up (startup/mixed.py)
    Setting("host_fallbacks", quiet="none"),
    Setting("global_fallback", quiet="none"),
    Setting("placement", quiet="one device"),
)

# the table as each reader uses it
MEASURED_SETTINGS = tuple(s.name for s in SETTINGS if s.tune_line is not None)  # what a tune record decides
TUNE_ORDER = tuple(s.name for s in sorted(SETTINGS, key=lambda s: s.tune_line or 0) if s.tune_line is not None)
PLAN_FIELD = {s.candidate: s.name for s in sorted(SETTINGS, key=lambda s: s.candidate_order) if s.candidate}
UNDRAFTED = tuple(s.name for s in SETTINGS if not s.drafted)
SHORT_SETTING = {s.name: s.short or s.name for s in SETTINGS}
QUIET_VALUES = {(s.name, s.quiet) for s in SETTINGS if s.quiet is not None}
