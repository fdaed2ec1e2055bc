"""The verdict: every check in a profile as pass / warn / fail / skip with its reason, and one overall line.

Pure data and torch-free: `bringup all`, `profile show` and the report all read it from a profile.
"""

from bringup.profiles.verdict.checks import Check, CheckResult
from bringup.profiles.verdict.overall import Verdict, verdict_of

__all__ = ["Check", "CheckResult", "Verdict", "verdict_of"]
