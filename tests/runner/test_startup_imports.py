"""A start imports what it runs: torch.compile's machinery (dynamo, about 2 s of a start) only when the plan
compiles (issue 36: where a start's time goes)."""

import subprocess
import sys

from bringup.runner.model.moe import SparseMoE, keep_grouped_eager_under_compile


def test_the_engine_and_its_start_do_not_import_dynamo():
    code = ("import sys, bringup.runner.engine.engine, bringup.cli.commands.generate\n"
            "print('torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_compiled_forward_leaves_the_grouped_experts_out_of_its_graphs_once():
    keep_grouped_eager_under_compile()
    marked = SparseMoE._grouped
    keep_grouped_eager_under_compile()
    assert SparseMoE._grouped is marked and marked.bringup_not_traced
    assert getattr(marked, "_torchdynamo_disable", False)  # torch.compiler.disable's mark
