"""A stage's checks in one line, the shape every stage ends its run with:
`verify-ops: 312 pass, 2 warn, 0 fail, 47 skip`."""

from bringup.profiles.verdict.checks import Check, count_results


def counts_line(checks: list[Check]) -> str:
    """`312 pass, 2 warn, 0 fail, 47 skip`."""
    return ", ".join(f"{n} {result}" for result, n in count_results(checks).items())


def section_line(stage: str, checks: list[Check]) -> str:
    """`stage: n pass, n warn, n fail, n skip`; when the checks span sections (verify-ops --compiled adds
    `compiled`), each section's counts follow, `; compiled: ...`."""
    sections = dict.fromkeys([stage, *(c.stage for c in checks)])
    return "; ".join(f"{name}: {counts_line([c for c in checks if c.stage == name])}" for name in sections)
