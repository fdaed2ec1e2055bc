"""The compiled path needs the runner's own decode measured faster, when bench e2e measured it."""

from bringup.profiles.schema import Capabilities, Capability, Profile
from bringup.profiles.sections.bench import BenchGroup, BenchRecord, BenchSection
from bringup.profiles.sections.ops import CompiledRecord
from bringup.runner.plan.plan import choose_compiled
from bringup.runner.plan.profile_facts import ProfileFacts


def profile_with_e2e(decode_speedup: float | None) -> Profile:
    records = []
    if decode_speedup is not None:
        records = [BenchRecord(key="decode_b1", name="decode", median_s=0.01, speedup=decode_speedup),
                   BenchRecord(key="decode_b1_eager", name="decode", median_s=0.01 * decode_speedup)]
    return Profile(
        capabilities=Capabilities(compile={"inductor": Capability(status="supported", evidence="ran")}),
        compiled=[CompiledRecord(target="swiglu_mlp", dtype="float32", backend="inductor", status="pass",
                                 speedup=1.4)],
        bench=BenchSection(groups={"e2e": BenchGroup(records=records)}),
    )


def test_blocks_alone_choose_compiled():
    assert choose_compiled(ProfileFacts(profile_with_e2e(None)), "float32").value == "inductor"


def test_slower_e2e_decode_keeps_the_runner_eager():
    choice = choose_compiled(ProfileFacts(profile_with_e2e(0.4)), "float32")
    assert choice.value is None and "e2e decode compiled runs at 0.40x of eager" in choice.evidence


def test_faster_e2e_decode_is_cited():
    choice = choose_compiled(ProfileFacts(profile_with_e2e(1.3)), "float32")
    assert choice.value == "inductor" and "bench e2e decode 1.30x" in choice.evidence
