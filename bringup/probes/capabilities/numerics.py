"""Small numeric helpers shared by the checks: seeded CPU inputs and error against a float64 reference."""

import torch


def seeded_randn(*shape: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float32)


def relative_error(result: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """(max abs error, max abs error / max |reference|), both on CPU in float64."""
    diff = (result.detach().to("cpu", torch.float64) - reference.to(torch.float64)).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    scale = float(reference.abs().max()) if reference.numel() else 1.0
    return max_abs, max_abs / (scale or 1.0)


def all_finite(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t.detach().to("cpu", torch.float64)).all())
