import torch

from bringup.probes.bench.catalog_adapter import compiled_block_resolver
from bringup.probes.ops.compiled.blocks import BLOCKS


def test_every_compiled_block_resolves_to_a_runnable_callable():
    resolve, why = compiled_block_resolver()
    assert resolve is not None, why
    for name in BLOCKS:
        fn, args = resolve(name, None, "float32", torch.device("cpu"))
        with torch.no_grad():
            out = fn(*args)
        assert torch.isfinite(out).all(), name
