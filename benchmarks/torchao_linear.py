"""Why bringup brings its own int8/int4 kernels instead of torchao's CPU recipes: one decode-shaped product (one row
of x, SmolLM2-135M's gate/up weight, 3072 x 576) through float32 F.linear, bringup's int8 and int4 kernels, and each
torchao weight-only / dynamic-int8 config, side by side in one run; a config torchao cannot run here prints why.

torchao is not a dependency: install it into the environment first (`pip install torchao`, with the same torch).
The weight is small enough to stay in cache between calls, so the figures compare the products' arithmetic, not
memory bandwidth.

Run:  python -m benchmarks.torchao_linear
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable

import torch

from benchmarks.machine import header_lines, machine_facts
from bringup.runner.weights.kernels import quantized as quantized_kernel

SHAPE = (3072, 576)


def best_us(fn: Callable[[], object], rounds: int = 50) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e6


def torchao_configs() -> dict[str, Callable[[], object]]:
    import torchao.quantization as tq

    configs: dict[str, Callable[[], object]] = {
        "Int8WeightOnlyConfig()": tq.Int8WeightOnlyConfig,
        "Int8DynamicActivationInt8WeightConfig()": tq.Int8DynamicActivationInt8WeightConfig,
    }
    for packing in ("plain", "plain_int32", "tile_packed_to_4d"):
        configs[f"Int4WeightOnlyConfig(group_size=32, int4_packing_format={packing!r})"] = \
            lambda packing=packing: tq.Int4WeightOnlyConfig(group_size=32, int4_packing_format=packing)
    return configs


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    warnings.filterwarnings("ignore")
    try:
        import torchao
        from torchao.quantization import quantize_
    except ImportError:
        print("torchao is not installed: pip install torchao (the same environment, the same torch)")
        return 2
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(f"torchao {torchao.__version__}; one row x [{SHAPE[1]}] times W [{SHAPE[0]}, {SHAPE[1]}], best of 50 calls")
    w, x = torch.randn(*SHAPE), torch.randn(1, SHAPE[1])
    rows = [("float32 F.linear", best_us(lambda: torch.nn.functional.linear(x, w)))]
    for scheme in ("int8", "int4"):
        stored = quantized_kernel.QUANTIZE[scheme](w)
        rows.append((f"bringup {scheme}", best_us(lambda stored=stored, scheme=scheme:
                                                   quantized_kernel.run(x, stored, None, scheme))))
    for name, config in torchao_configs().items():
        linear = torch.nn.Linear(SHAPE[1], SHAPE[0], bias=False)
        linear.weight.data.copy_(w)
        try:
            quantize_(linear, config())
            with torch.inference_mode():
                rows.append((f"torchao {name}", best_us(lambda linear=linear: linear(x))))
        except Exception as exc:
            rows.append((f"torchao {name}", f"cannot run here: {type(exc).__name__}: {str(exc)[:120]}"))
    baseline = rows[0][1]
    for name, us in rows:
        print(f"{name:82} {us:8.0f} us  {baseline / us:5.2f}x float32" if isinstance(us, float) else f"{name:82} {us}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
