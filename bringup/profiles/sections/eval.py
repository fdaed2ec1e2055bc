"""Profile section of `bringup eval`: a real model's perplexity over a text, per model evaluated, and how far its
next-token distributions were from a reference run's."""

from __future__ import annotations

from bringup.profiles.base_model import ProfileModel


class EvalReferenceRecord(ProfileModel):
    source: str  # "float64" (the same weights on the CPU) or the reference file's path
    exact: bool  # False: KL over the reference's top k plus one bin for the rest, a lower bound
    k: int | None = None
    kld_mean: float
    kld_p99: float
    kld_max: float
    top1_agreement: float  # fraction of scored positions whose top token is the reference's
    reference_ppl: float
    delta_ppl: float  # this run's perplexity minus the reference's
    rest_mass_mean: float | None = None  # top-k reference: its mean probability outside the k tokens
    reference_dtype: str | None = None
    reference_device: str | None = None


class EvalRecord(ProfileModel):
    """One eval run: keyed in the profile by `model [short hash of model files, text, windows, dtype]`."""

    model: str
    dtype: str
    device: str
    ctx: int
    stride: int
    text: str  # the text file's path, or the built-in text
    text_sha256: str
    tokens: int  # tokens of the text evaluated (the first is never scored)
    scored: int
    windows: int
    ppl: float
    nll: float  # mean negative log-likelihood, nats per token
    se: float  # its standard error
    tokens_per_s: float  # scored tokens per second of the run's own windows
    seconds: float
    reference: EvalReferenceRecord | None = None
    fallbacks: dict[str, int] = {}
    finished: str | None = None
