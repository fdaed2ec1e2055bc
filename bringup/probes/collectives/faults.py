"""Test and diagnostic fault injection: make one rank corrupt its data, exit, or hang on purpose.

Set by the hidden CLI option `--inject-fault` or the environment variable below; every worker reads it
and only the named rank acts. Spec: `rank=R:KIND[:op=OP][:elements=K][:code=C]`

  corrupt  rank R overwrites the first K elements (default 3) of its contribution to OP (default: every
           op) with a value the pattern never holds, *before* the real collective runs -- so the wrong
           values travel through the library and the checks count them like any other error.
  exit     rank R ends abruptly (os._exit(C), default C=3) when it reaches OP (default: the first op).
  hang     rank R sleeps forever when it reaches OP, so the others wait on it.

It exists to prove the detection works (the tests use it) and to rehearse a failure on a real cluster.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

ENV_VAR = "BRINGUP_COLLECTIVES_INJECT_FAULT"
KINDS = ("corrupt", "exit", "hang")


@dataclass(frozen=True)
class FaultSpec:
    rank: int
    kind: str
    op: str | None = None
    elements: int = 3
    code: int = 3

    @classmethod
    def parse(cls, text: str) -> FaultSpec:
        """Parse 'rank=1:corrupt:op=all_reduce_sum:elements=5'. Raises ValueError saying what is wrong."""
        fields: dict[str, str] = {}
        kind = None
        for part in (p.strip() for p in text.split(":") if p.strip()):
            if "=" in part:
                key, value = part.split("=", 1)
                fields[key.strip()] = value.strip()
            elif part in KINDS:
                kind = part
            else:
                raise ValueError(f"fault spec part {part!r} is not one of {', '.join(KINDS)} or key=value")
        if kind is None or "rank" not in fields:
            raise ValueError(f"fault spec {text!r} needs rank=R and a kind ({', '.join(KINDS)})")
        unknown = set(fields) - {"rank", "op", "elements", "code"}
        if unknown:
            raise ValueError(f"fault spec {text!r}: unknown key(s) {', '.join(sorted(unknown))}")
        try:
            spec = cls(rank=int(fields["rank"]), kind=kind, op=fields.get("op"),
                       elements=int(fields.get("elements", 3)), code=int(fields.get("code", 3)))
        except ValueError as exc:
            raise ValueError(f"fault spec {text!r}: rank, elements and code must be integers") from exc
        if spec.rank < 0 or spec.elements < 1:
            raise ValueError(f"fault spec {text!r}: rank must be >= 0 and elements >= 1")
        return spec

    def matches(self, rank: int, op: str) -> bool:
        return rank == self.rank and (self.op is None or self.op == op)

    def corrupt_elements(self, rank: int, op: str) -> int:
        """How many leading elements this rank must corrupt for `op` (0: none)."""
        return self.elements if self.kind == "corrupt" and self.matches(rank, op) else 0

    def act_on_arrival(self, rank: int, op: str) -> None:
        """Exit or hang here if this rank is the one told to."""
        if self.kind == "exit" and self.matches(rank, op):
            os._exit(self.code)
        if self.kind == "hang" and self.matches(rank, op):
            while True:
                time.sleep(3600)


def fault_from_env() -> FaultSpec | None:
    text = os.environ.get(ENV_VAR, "").strip()
    return FaultSpec.parse(text) if text else None
