"""The hand-written parts of a reproducer file: the run functions and main (the rest is extracted)."""

from __future__ import annotations

SYNCHRONIZE = '''
def synchronize(device: torch.device) -> None:
    """Wait for the device (bringup asks its backend module; for torch's device modules that is this call)."""
    if device.type != "cpu":
        module = getattr(torch, device.type, None)
        if module is not None and hasattr(module, "synchronize"):
            module.synchronize()
'''

IMPORTS = ("import argparse", "import os", "import signal", "import subprocess", "import sys",
           "from dataclasses import dataclass")

COMMON = '''
@dataclass(frozen=True)
class CaseFacts:
    """What verify-ops' judging reads of the catalog's case."""

    label: str
    judge: str = "close"
    accum: int = 1
    step_rounding: bool = False
    out: object = None
    accumulator: str | None = None
    accumulator_reason: str = ""


def _fmt(value: object) -> str:
    return "n/a" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:400]


def _inputs(device: torch.device) -> tuple[list, list]:
    """Inputs as verify-ops built them: seeded float64 on the CPU, cast, moved, laid out (and the reference copy)."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(SEED)
    return prepare_inputs(build_inputs(gen), getattr(torch, DTYPE), device, KEEP_DTYPE, layout)


def _value_at(result: object, reference: object, position: int, index: list[int]) -> str:
    outs, refs = flatten_outputs(result), flatten_outputs(reference)
    if position >= len(outs) or tuple(outs[position].shape) != tuple(refs[position].shape):
        return ""
    where = tuple(index)
    return f" (device {outs[position][where].item()!r} vs float64 {refs[position][where].item()!r})"


def _print_recorded() -> None:
    figures = ", ".join(f"{k} {_fmt(v)}" for k, v in RECORDED.items() if k != "message" and v is not None)
    print(f"verify-ops recorded: {figures}")
    if RECORDED.get("message"):
        print(f"  {RECORDED['message']}")


def _device_problem(device: torch.device) -> str | None:
    if device.type == "cpu":
        return None
    module = getattr(torch, device.type, None)
    available = getattr(module, "is_available", None)
    if module is None or (available is not None and not available()):
        return f"this torch has no usable {device.type} device"
    return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _run_isolated(device_name: str, timeout_s: float) -> int:
    """verify-ops saw this case crash or hang: a child process runs it, so that is reported, not suffered."""
    cmd = [sys.executable, os.path.abspath(__file__), "--device", device_name, "--in-process"]
    try:
        proc = subprocess.run(cmd, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"FAIL: timeout, no result within {timeout_s:g} s (the child process was killed)")
        return 1
    if proc.returncode < 0:
        print(f"FAIL: crashed, the process died of {_signal_name(-proc.returncode)}")
        return 1
    return proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    parser.add_argument("--device", default=DEVICE, help=f"device to run on (default {DEVICE}, where verify-ops ran)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds before a hang counts as the defect")
    parser.add_argument("--in-process", action="store_true", help="no child process, even for a crash or hang")
    args = parser.parse_args()
    try:
        device = torch.device(args.device)
    except (RuntimeError, ValueError) as exc:
        print(f"cannot run: --device {args.device!r} is not a torch device ({_line(exc)})")
        return 2
    problem = _device_problem(device)
    if problem is not None:
        print(f"cannot run: {problem}; pass --device")
        return 2
    if ISOLATE and not args.in_process:
        return _run_isolated(args.device, args.timeout)
    _print_recorded()
    try:
        return run(device)
    except Exception as exc:
        print(f"FAIL: error, {_line(exc)}")
        return 1
'''

ENTRY = '''
if __name__ == "__main__":
    sys.exit(main())
'''

OP_RUN = '''
CASE_FACTS = CaseFacts(label=CASE, judge=JUDGE, accum=ACCUM, step_rounding=STEP_ROUNDING, out=out_variant,
                       accumulator=ACCUMULATOR, accumulator_reason=ACCUMULATOR_REASON)


def run(device: torch.device) -> int:
    """The case as verify-ops runs it (bringup/probes/ops/execute.py, run_case); 1 while it fails."""
    try:
        dev_args, ref_args = _inputs(device)
    except Exception as exc:
        print(f"PASS: unsupported, {DTYPE} inputs on {device} rejected ({_line(exc)}); not a failure for verify-ops")
        return 0
    before = snapshot(dev_args)
    torch.manual_seed(1234)
    try:
        with torch.no_grad():
            result = op_fn(*dev_args)
            synchronize(device)
    except Exception as exc:
        if is_unsupported_error(exc):
            print(f"PASS: unsupported, the op rejected the case ({_line(exc)}); not a failure for verify-ops")
            return 0
        print(f"FAIL: error, the op raised {_line(exc)}")
        return 1
    with torch.no_grad():
        reference = reference_fn(*ref_args)
    note = None
    arith = None
    if CASE_FACTS.judge in ("multinomial", "sampler"):
        probs = reference if CASE_FACTS.judge == "sampler" else ref_args[0]
        (comp, note), tol = _judge_multinomial(result, probs, CASE_FACTS), None
    else:
        arith = Arithmetic(OP, reference_fn, ref_args, DIM)
        comp, tol = judge_outputs(CASE_FACTS, result, reference, arith)
    problems = list(comp.problems)
    changed = changed_inputs(dev_args, before)
    if changed:
        problems.append(f"modified its input argument(s) {changed}")
    if CASE_FACTS.out is not None and isinstance(result, torch.Tensor):
        problems.extend(_guard_check(CASE_FACTS, dev_args, result, reference, tol, arith))
    print(f"{OP}[{DTYPE}] {CASE} on {device}:")
    print(f"  max abs {_fmt(comp.max_abs)}  max rel {_fmt(comp.max_rel)}  nmse {_fmt(comp.nmse)}")
    if comp.worst_index is not None:
        output = "" if comp.worst_output is None else f" of output {comp.worst_output}"
        values = _value_at(result, reference, comp.worst_output or 0, comp.worst_index)
        print(f"  worst index {comp.worst_index}{output}{values}")
    if comp.bound is not None:
        print(f"  decided by {comp.decided_by}: allowed error {comp.bound:.6g} at the worst element "
              f"(largest error / allowed {_fmt(comp.bound_ratio)}); bias {_fmt(comp.bias)}, z {_fmt(comp.bias_z)}")
    if note:
        print(f"  {note}")
    for problem in problems:
        print(f"  problem: {problem}")
    failed = not comp.passed or bool(problems)
    print("FAIL: outside what verify-ops accepts" if failed else "PASS: within what verify-ops accepts")
    return 1 if failed else 0
'''

COMPILED_RUN = '''
def _largest_difference(a: object, b: object) -> str:
    """Where the compiled result is furthest from the eager one (for a first look at the miscompile)."""
    worst = (-1.0, 0, [])
    for position, (x, y) in enumerate(zip(flatten_outputs(a), flatten_outputs(b))):
        if x.shape != y.shape or x.numel() == 0:
            continue
        diff = (x.detach().to("cpu", torch.float64) - y.detach().to("cpu", torch.float64)).abs()
        diff = diff.nan_to_num(float("inf"))
        flat = int(diff.flatten().argmax())
        if float(diff.flatten()[flat]) > worst[0]:
            index = [int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape)]
            worst = (float(diff.flatten()[flat]), position, index)
    return f"max abs {worst[0]:.6g} at index {worst[2]} of output {worst[1]}" if worst[0] >= 0 else "n/a"


def run(device: torch.device) -> int:
    """Eager and torch.compile against float64, as verify-ops --compiled does (bringup/probes/ops/compiled)."""
    from torch._dynamo.backends.registry import lookup_backend

    try:
        lookup_backend(BACKEND)
    except Exception:
        print(f"cannot run: torch.compile backend {BACKEND!r} is not registered in this Python "
              "(verify-ops had it from a plugin: import that first)")
        return 2
    dev_args, ref_args = _inputs(device)
    try:
        eager_out = _call(op_fn, dev_args, device)
    except Exception as exc:
        if is_unsupported_error(exc):
            print(f"PASS: unsupported, eager run rejected ({_line(exc)}); not a failure for verify-ops")
            return 0
        print(f"FAIL: error, the eager run raised {_line(exc)}")
        return 1
    with torch.no_grad():
        reference = reference_fn(*ref_args)
    eager_err = rmse(eager_out, reference)
    numel = sum(t.numel() for t in flatten_outputs(reference))
    torch._dynamo.reset()
    try:
        compiled = torch.compile(op_fn, backend=BACKEND, dynamic=False)
        out = _call(compiled, dev_args, device)
    except Exception as exc:
        print(f"FAIL: compile_error, torch.compile(backend={BACKEND!r}) raised {_line(exc)}")
        return 1
    verdict = judge(DTYPE, eager_err, rmse(out, reference), numel)
    print(f"{TARGET}[{DTYPE}] {CASE or ''} eager vs torch.compile(backend={BACKEND!r}) on {device}:")
    print(f"  eager RMSE vs float64 {eager_err:.6g}; compiled RMSE vs float64 {verdict.compiled_err:.6g}")
    print(f"  tolerance: compiled <= {verdict.k:g} * eager + tol/10 = {verdict.allowed:.6g} "
          f"(tol {row_for(DTYPE).compiled_tol:g} for {DTYPE})")
    print(f"  compiled vs eager: {_largest_difference(out, eager_out)}")
    if verdict.accepted:
        print("PASS: the compiled result is not materially worse than eager")
        return 0
    print("FAIL: mismatch, the compiled result is materially worse than eager")
    return 1
'''
