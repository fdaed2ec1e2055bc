"""Profile section of `bringup tune`: per served model, the plan it was measured to run best with on this device,
and every timing behind it, so a later start-up takes the same choices from the same numbers without timing."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from bringup.profiles.base_model import ProfileModel

# how a record's plan holds its values: 1, the text the plan table showed ("256 × 16 tokens"; records written before
# PLAN_VALUES_AS_DATA, which still load: shown, never read as numbers); 2, the values as data with that text in `shown`
PLAN_VALUES_AS_TEXT, PLAN_VALUES_AS_DATA = 1, 2


class RecordedChoice(ProfileModel):
    # the setting's value as data: a name, a number, a list of names, or None (which a profile file leaves out); the
    # plan table's text in a format-1 record
    value: Any = None
    evidence: str
    shown: str | None = None  # the value as the plan table shows it (None in a format-1 record: its value is that)


class CandidateRecord(ProfileModel):
    """Seconds per decode step of the served model with a candidate path and with its plain alternative."""

    floats_checked_later: ClassVar[bool] = True  # runner/plan/record/bounds.py, as a fallback at start-up

    candidate_s: float
    plain_s: float
    spread: float = 0.0  # relative spread of the repeated timings (the machine's own noise)


class PrefillRecord(ProfileModel):
    """A one-sequence decode step, and steps of that decode and a prompt chunk by the chunk's tokens at no context and
    at `context` tokens of context, and a decode step of `decodes` sequences (0: not timed), in seconds (the prefill
    chunk's timings). `with_decode` false: a record from
    before the chunk ran in the decode's forward, whose timings are of the chunk alone (not replayed)."""

    floats_checked_later: ClassVar[bool] = True

    decode_step: float
    by_tokens: dict[int, float]
    how: str = ""
    context: int = 0
    at_context: dict[int, float] = {}
    with_decode: bool = False
    decodes: int = 1
    decodes_step: float = 0.0


class PromptRecord(ProfileModel):
    """A prompt of `tokens` timed through the fused prompt layers and through the model's modules, alternated, in
    seconds per run (the prompt_layers row's timings)."""

    floats_checked_later: ClassVar[bool] = True

    tokens: int
    kernels: list[float]
    modules: list[float]


class MixedRecord(ProfileModel):
    """A step of `decodes` decodes and a `tokens`-token prompt chunk past the fused decode layers' rows, timed as one
    forward (`one`) and as two (`two`), alternated, by the decodes' context, in seconds per run (the mixed_steps row's
    timings)."""

    floats_checked_later: ClassVar[bool] = True

    decodes: int
    tokens: int
    one: dict[int, list[float]]
    two: dict[int, list[float]]


class AttentionCheckRecord(ProfileModel):
    """The start-up attention check: each SDPA candidate's error against float64 beside the plain path's, and the
    seconds of a long prompt's attention with it and with the plain path (only those the choice timed)."""

    floats_checked_later: ClassVar[bool] = True

    plain_error: float
    plain_s: float
    errors: dict[str, float] = {}
    seconds: dict[str, float] = {}
    cannot_run: dict[str, str] = {}
    tokens: int = 512  # the timed prompt's length; records from before it was kept timed 512 tokens


class ModelPlanRecord(ProfileModel):
    """One tuned model, keyed in the profile by `name [short hash of its config and weights' index]`."""

    floats_checked_later: ClassVar[bool] = True  # runner/plan/record/bounds.py, as a fallback at start-up

    model: str
    source: str  # the directory or .gguf file given, or "built-in"
    model_sha256: str
    device: str
    dtype: str
    quantization: str = "none"  # the --quantization it was tuned under (records from before it said nothing: none)
    tuned: str  # when tune recorded it (UTC, ISO 8601)
    bringup: str
    runs: int  # start-up measurements tune combined
    plan: dict[str, RecordedChoice]  # setting -> the choice and its evidence
    plan_format: Literal[1, 2] = PLAN_VALUES_AS_TEXT  # how `plan` holds its values (older records say nothing: text)
    block_size: int | None = None  # tokens per KV block, what kv_blocks counts (None in a format-1 record)
    # the combined timings the choices were made from (replayed at start-up)
    layout_times: dict[int, dict[str, float]]  # rows -> weight kind -> seconds per product
    layout_skipped: dict[str, str] = {}
    layout_stream_bytes: int
    layout_spreads: dict[int, dict[str, float]] = {}  # rows -> weight kind -> spread across the runs
    paged_decode: bool
    paged_decode_evidence: str
    fused_decode: bool = True
    candidates: dict[str, CandidateRecord] = {}
    candidates_skipped: dict[str, str] = {}
    decode_how: str = ""
    by_batch: dict[int, float] = {}  # batch size -> seconds per decode step
    by_batch_again: dict[int, float] = {}
    batch_spreads: dict[int, float] = {}
    memory_batch: int | None = None
    # decode steps past the layout's small steps: batch -> the fused decode layers' seconds (candidate_s) and the
    # modules' (plain_s), doubling from twice the switch while the fused layers won (empty: not timed, older record)
    fused_rows: dict[int, CandidateRecord] = {}
    noise: dict[str, float] = {}  # what -> floor noise across tune's runs
    cpu_share: float | None = None  # the smallest share of the CPU tune's timed threads got (None: not measured)
    # the torch it was tuned under (None: a record from before it was kept); a record of another torch is not replayed
    torch: str | None = None
    # the decisions start-up measures after the plan is followed (None: not measured by tune, or an older record;
    # start-up then measures them)
    graph_decode: CandidateRecord | None = None  # replayed graphs vs eager, seconds per decode step at batch 1
    prefill: PrefillRecord | None = None
    attention_check: AttentionCheckRecord | None = None
    prompt: PromptRecord | None = None
    mixed: MixedRecord | None = None

    def value(self, setting: str) -> Any:
        """`setting`'s recorded value as data; None when not recorded, or recorded as text (format 1)."""
        choice = self.plan.get(setting)
        return choice.value if choice is not None and self.plan_format >= PLAN_VALUES_AS_DATA else None

    def shown(self, setting: str) -> str | None:
        """`setting`'s value as the plan table showed it; None when not recorded."""
        choice = self.plan.get(setting)
        if choice is None:
            return None
        return choice.shown if choice.shown is not None else str(choice.value)
