"""Pure parts: bus factors, bandwidth, sizes, fault specs, and the exactness of the data patterns."""

import pytest
import torch

from bringup.probes.collectives.bandwidth import algbw_gbps, bus_factor, busbw_gbps
from bringup.probes.collectives.faults import FaultSpec
from bringup.probes.collectives.ops import element_count
from bringup.probes.collectives.patterns import SUPPORTED_DTYPES, corrupt_value, pattern, value_bound
from bringup.probes.collectives.sizes import format_bytes, parse_sizes


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_bus_factors_follow_nccl_tests(n):
    assert bus_factor("all_reduce_sum", n) == pytest.approx(2 * (n - 1) / n)
    assert bus_factor("all_reduce_max", n) == pytest.approx(2 * (n - 1) / n)
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert bus_factor(op, n) == pytest.approx((n - 1) / n)
    assert bus_factor("broadcast", n) == 1.0
    assert bus_factor("barrier", n) is None


def test_bandwidth_is_bytes_over_time_times_factor():
    assert algbw_gbps(2_000_000_000, 2.0) == pytest.approx(1.0)
    assert busbw_gbps("all_reduce_sum", 4, 2_000_000_000, 2.0) == pytest.approx(1.5)
    assert algbw_gbps(0, 1.0) is None


def test_sizes_parse_binary_units_and_reject_nonsense():
    assert parse_sizes("4K,1,32M,4k") == [1, 4096, 32 * 1024**2]
    assert format_bytes(32 * 1024**2) == "32 MiB" and format_bytes(4) == "4 B"
    for bad in ("", "0", "4Q", "-1"):
        with pytest.raises(ValueError):
            parse_sizes(bad)


def test_element_counts_round_split_ops_to_the_world():
    assert element_count("all_reduce_sum", 1, 4, 4) == 1           # one element minimum
    assert element_count("all_gather", 1, 4, 4) == 4               # one per rank minimum
    assert element_count("reduce_scatter", 4096 + 4, 4, 4) == 1024
    assert element_count("barrier", 4096, 4, 4) == 0


def test_fault_spec_parsing():
    spec = FaultSpec.parse("rank=1:corrupt:op=all_gather:elements=5")
    assert (spec.rank, spec.kind, spec.op, spec.elements) == (1, "corrupt", "all_gather", 5)
    assert spec.corrupt_elements(1, "all_gather") == 5 and spec.corrupt_elements(0, "all_gather") == 0
    assert spec.corrupt_elements(1, "broadcast") == 0
    for bad in ("corrupt", "rank=1", "rank=x:exit", "rank=1:explode", "rank=1:hang:when=now"):
        with pytest.raises(ValueError):
            FaultSpec.parse(bad)


@pytest.mark.parametrize("world", [2, 3, 4, 8, 64])
@pytest.mark.parametrize("name", sorted(SUPPORTED_DTYPES))
def test_patterns_sum_exactly_in_every_dtype_even_with_a_corrupted_element(name, world):
    """The premise of exact checking: sums over all ranks (also with the corrupt value) are exact."""
    dtype = SUPPORTED_DTYPES[name]
    bound = value_bound(dtype, world)
    if bound is None:
        pytest.skip(f"{name} cannot sum {world} ranks exactly (reported as unsupported)")
    count = 4096
    exact = torch.stack([pattern(r, count, bound, salt=3) for r in range(world)]).sum(0)
    in_dtype = torch.zeros(count, dtype=dtype)
    for r in range(world):
        in_dtype += pattern(r, count, bound, salt=3).to(dtype)
    assert torch.equal(in_dtype.to(torch.int64), exact)
    corrupted = exact - pattern(0, count, bound, salt=3) + corrupt_value(bound)
    assert torch.equal(corrupted.to(dtype).to(torch.int64), corrupted)
    assert int(pattern(1, count, bound).max()) <= bound < corrupt_value(bound)
