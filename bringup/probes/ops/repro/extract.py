"""Python objects of the op catalog as standalone source: closures flattened, non-torch helpers inlined.

`SourceBundle.bind(name, value)` makes `name` mean `value` in the generated module: a literal, a torch
callable by its dotted name, a stdlib or torch import, or the helper's own source text (top-level
functions, classes and module constants verbatim; a nested function or lambda through a factory that
receives its closure cells and default values). Anything it cannot express raises NotExpressible; the
caller then reports the case instead of writing a misleading file. repro/check.py proves the result.
"""

from __future__ import annotations

import ast
import inspect
import math
import sys
import textwrap
import types
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch

# bringup modules whose helpers may be inlined; anything else of bringup (the runner, the backends)
# pulls in machinery a standalone file cannot carry
INLINABLE_BRINGUP = ("bringup.probes.ops", "bringup.probes.ops.compiled.blocks", "bringup.probes.ops.compiled.rule",
                     "bringup.probes.ops.compiled.execute")
TORCH_NAMESPACES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft", "torch._C._nn",
                    "torch.Tensor")
MODULE_ALIASES = {"torch.nn.functional": "F"}


class NotExpressible(Exception):
    """This object cannot be written as standalone source faithfully (the message says why)."""


@lru_cache(maxsize=64)
def _module_tree(filename: str) -> ast.Module:
    with open(filename, encoding="utf-8") as fh:
        return ast.parse(fh.read(), filename)


def _is_stdlib_or_torch(module: str) -> bool:
    root = module.split(".")[0]
    return root == "torch" or root in sys.stdlib_module_names


def _check_module(module: str, what: str) -> None:
    if module.startswith("bringup") and not module.startswith(INLINABLE_BRINGUP):
        raise NotExpressible(f"{what} comes from {module}, which a standalone file cannot carry")


def loaded_names(tree: ast.AST) -> set[str]:
    """Names read anywhere in `tree`, annotations left out (they are strings under postponed evaluation)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.arg):
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for child in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults, *node.body):
                if child is not None:
                    visit(child)
            return
        if isinstance(node, ast.AnnAssign):
            for child in (node.target, node.value):
                if child is not None:
                    visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if module and module.startswith("bringup"):
                raise NotExpressible(f"imports {module} inside its body")
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def torch_expression(value: Any) -> str | None:
    """`torch.exp`, `torch.nn.functional.gelu`, `torch.ops.aten._softmax.out`..., or None."""
    if isinstance(value, torch._ops.OpOverload):
        ns, _, rest = value.name().partition("::")
        opname, _, overload = rest.partition(".")
        return f"torch.ops.{ns}.{opname}.{overload or 'default'}"
    if isinstance(value, torch._ops.OpOverloadPacket):
        ns, _, opname = value._qualified_op_name.partition("::")
        return f"torch.ops.{ns}.{opname}"
    name = getattr(value, "__name__", None)
    if not name:
        return None
    for namespace in TORCH_NAMESPACES:
        holder: Any = torch
        for part in namespace.split(".")[1:]:
            holder = getattr(holder, part, None)
        if holder is not None and getattr(holder, name, None) is value:
            return f"{namespace}.{name}"
    return None


def literal(value: Any) -> str | None:
    """Source text that evaluates to an equal plain value, or None."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, (tuple, list)):
        parts = [literal(v) for v in value]
        if any(p is None for p in parts):
            return None
        if isinstance(value, list):
            return "[" + ", ".join(parts) + "]"  # type: ignore[arg-type]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # type: ignore[arg-type]
    return None


@dataclass
class SourceBundle:
    """The generated module, built up name by name in dependency order."""

    imports: dict[str, None] = field(default_factory=lambda: {"import torch": None})
    blocks: list[str] = field(default_factory=list)
    bound: dict[str, Any] = field(default_factory=dict)  # name -> the object it stands for
    substitutes: dict[tuple[str, str], str] = field(default_factory=dict)  # (module, __name__) -> source
    _counter: int = 0
    _expressed: dict[int, str] = field(default_factory=dict)  # id(nested function) -> its emitted name
    _in_progress: set[int] = field(default_factory=set)

    def import_lines(self) -> list[str]:
        """Standard library first, then torch (each group sorted)."""
        return sorted(self.imports, key=lambda line: (line.split()[1].startswith("torch"), line))

    # -- binding names -------------------------------------------------------------------------------

    def bind(self, name: str, value: Any, module: str | None = None) -> None:
        """Make `name` evaluate to `value` in the generated module (module: where `name` was a global)."""
        if name in self.bound:
            if self.bound[name] is value or _same_plain(self.bound[name], value):
                return
            raise NotExpressible(f"two different objects are both called {name!r}")
        self.bound[name] = value
        if (inspect.isfunction(value) or inspect.isclass(value)) and id(value) in self._expressed:
            self.blocks.append(f"{name} = {self._expressed[id(value)]}")
            return
        key = (getattr(value, "__module__", None), getattr(value, "__name__", None))
        if key in self.substitutes:
            self.blocks.append(self.substitutes[key].strip())  # type: ignore[index]
            return
        if isinstance(value, types.ModuleType):
            self._import_module(name, value)
            return
        expr = torch_expression(value) if callable(value) else literal(value)
        if expr is not None:
            if expr != name:
                self.blocks.append(f"{name} = {expr}")
            return
        owner, own_name = key
        if owner and _is_stdlib_or_torch(owner) and getattr(sys.modules.get(owner), own_name or "", None) is value:
            self.imports[f"from {owner} import {own_name}" + (f" as {name}" if name != own_name else "")] = None
        elif (inspect.isfunction(value) or inspect.isclass(value)) and _is_top_level(value):
            self._expressed[id(value)] = name
            self._bind_top_level(name, value)
        elif inspect.isfunction(value):
            self._nested(value, name)
        elif module is not None and not callable(value):
            self._bind_module_constant(name, module)
        else:
            raise NotExpressible(f"{name!r} is a {type(value).__name__}, which has no standalone source")

    def expression(self, value: Any) -> str:
        """Source text for `value` where it appears as a closure cell or a default value."""
        text = literal(value)
        if text is not None:
            return text
        if callable(value):
            expr = torch_expression(value)
            if expr is not None:
                return expr
        if inspect.isfunction(value) and _is_top_level(value):
            self.bind(value.__name__, value)
            return value.__name__
        if inspect.isfunction(value):
            return self._nested(value)
        raise NotExpressible(f"a captured {type(value).__name__} has no standalone source")

    # -- the kinds of source -------------------------------------------------------------------------

    def _import_module(self, name: str, module: types.ModuleType) -> None:
        full = module.__name__
        if not _is_stdlib_or_torch(full):
            raise NotExpressible(f"uses module {full}")
        line = f"import {full}" if full == name else f"import {full} as {name}"
        self.imports[line] = None

    def _bind_globals(self, names: set[str], namespace: dict[str, Any], module: str, skip: set[str]) -> None:
        for ref in sorted(names - skip):
            if ref in namespace:
                self.bind(ref, namespace[ref], module)

    def _bind_top_level(self, name: str, value: Any) -> None:
        module = value.__module__
        _check_module(module, value.__qualname__)
        try:
            source = textwrap.dedent(inspect.getsource(value))
        except (OSError, TypeError) as exc:
            raise NotExpressible(f"no source for {value.__qualname__} ({exc})") from None
        tree = ast.parse(source)
        namespace = vars(sys.modules[module])
        self._bind_globals(loaded_names(tree), namespace, module, {value.__name__})
        self.blocks.append(source.strip())
        if name != value.__name__:
            self.blocks.append(f"{name} = {value.__name__}")

    def _bind_module_constant(self, name: str, module: str) -> None:
        _check_module(module, name)
        mod = sys.modules[module]
        filename = inspect.getsourcefile(mod)
        if filename is None:
            raise NotExpressible(f"no source for {module}")
        tree = _module_tree(filename)
        found = [node for node in tree.body if _assigns(node, name)]
        if len(found) != 1:
            raise NotExpressible(f"{module}.{name} is not one plain assignment")
        with open(filename, encoding="utf-8") as fh:
            text = ast.get_source_segment(fh.read(), found[0])
        if text is None:
            raise NotExpressible(f"no source for {module}.{name}")
        self._bind_globals(loaded_names(found[0].value or found[0]), vars(mod), module, {name})
        self.blocks.append(text)

    def _nested(self, fn: types.FunctionType, name: str | None = None) -> str:
        """A nested function or lambda: a factory taking its cells and defaults, called with their values."""
        if id(fn) in self._expressed:
            return self._expressed[id(fn)]
        if id(fn) in self._in_progress:
            raise NotExpressible(f"{fn.__qualname__} refers to itself through its closure")
        _check_module(fn.__module__, fn.__qualname__)
        self._in_progress.add(id(fn))
        emitted = name or self._fresh("fn" if fn.__name__ == "<lambda>" else fn.__name__)
        factory_name = f"_build_{emitted}"
        try:
            node = locate(fn)
            factory, params = _factory_source(node, fn, factory_name)
            args = [self.expression(v) for v in params.values()]
            self._bind_globals(loaded_names(node), fn.__globals__, fn.__module__,
                               set(fn.__code__.co_freevars) | set(fn.__code__.co_varnames))
        finally:
            self._in_progress.discard(id(fn))
        call = ", ".join(f"{p}={a}" for p, a in zip(params, args))
        if not params and isinstance(node, ast.Lambda):
            self.blocks.append(f"{emitted} = {factory.splitlines()[1].strip().removeprefix('return ')}")
        else:
            self.blocks.append(f"{factory}\n\n\n{emitted} = {factory_name}({call})")
        self._expressed[id(fn)] = emitted
        self.bound[emitted] = fn
        return emitted

    def _fresh(self, base: str) -> str:
        self._counter += 1
        return f"{base}_{self._counter}"


def _same_plain(a: Any, b: Any) -> bool:
    la, lb = literal(a), literal(b)
    return la is not None and la == lb


def _is_top_level(value: Any) -> bool:
    module = sys.modules.get(getattr(value, "__module__", "") or "")
    return (module is not None and value.__qualname__ == value.__name__
            and getattr(module, value.__name__, None) is value)


def _assigns(node: ast.stmt, name: str) -> bool:
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    return isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name


def locate(fn: types.FunctionType) -> ast.Lambda | ast.FunctionDef:
    """The AST node of a nested function: same first line, same name, same parameters, same code."""
    filename = inspect.getsourcefile(fn)
    if filename is None:
        raise NotExpressible(f"no source file for {fn.__qualname__}")
    code = fn.__code__
    nargs = code.co_argcount + code.co_kwonlyargcount
    params = list(code.co_varnames[:nargs])
    candidates = []
    for node in ast.walk(_module_tree(filename)):
        if isinstance(node, ast.Lambda) and code.co_name == "<lambda>":
            first = node.lineno
        elif isinstance(node, ast.FunctionDef) and node.name == code.co_name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        else:
            continue
        names = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
        if first == code.co_firstlineno and names == params:
            candidates.append(node)
    distinct = {ast.dump(n): n for n in candidates}
    if len(distinct) == 1:
        return next(iter(distinct.values()))
    matching = [n for n in distinct.values() if _compiles_to(n, fn)]
    if len(matching) != 1:
        raise NotExpressible(f"cannot find the source of {fn.__qualname__} unambiguously")
    return matching[0]


def _compiles_to(node: ast.Lambda | ast.FunctionDef, fn: types.FunctionType) -> bool:
    try:
        factory, params = _factory_source(node, fn, "_candidate")
        namespace: dict[str, Any] = dict(fn.__globals__)
        exec(compile("from __future__ import annotations\n" + factory, "<candidate>", "exec"), namespace)
        made = namespace["_candidate"](*params.values())
    except Exception:
        return False
    made_code, code = made.__code__, fn.__code__
    return (made_code.co_code, made_code.co_consts, made_code.co_names) == (code.co_code, code.co_consts, code.co_names)


def _factory_source(node: ast.Lambda | ast.FunctionDef, fn: types.FunctionType,
                    factory_name: str) -> tuple[str, dict[str, Any]]:
    """`def factory(<cells>, <defaults>): ...; return <fn>` and the values to call it with, by parameter."""
    if isinstance(node, ast.FunctionDef) and node.decorator_list:
        raise NotExpressible(f"{fn.__qualname__} is decorated")
    node = _copy(node)
    params: dict[str, Any] = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            params[name] = cell.cell_contents
        except ValueError:
            raise NotExpressible(f"{fn.__qualname__}: closure variable {name!r} is unset") from None
    for i, value in enumerate(fn.__defaults__ or ()):
        node.args.defaults[i] = _default_node(value, f"_default_{i}", params)
    kw_values = fn.__kwdefaults__ or {}
    for i, arg in enumerate(node.args.kwonlyargs):
        if arg.arg in kw_values:
            node.args.kw_defaults[i] = _default_node(kw_values[arg.arg], f"_kwdefault_{arg.arg}", params)
    for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
        arg.annotation = None
    if isinstance(node, ast.FunctionDef):
        node.returns = None
        body = ast.unparse(ast.fix_missing_locations(node)) + f"\nreturn {node.name}"
    else:
        body = "return " + ast.unparse(ast.fix_missing_locations(node))
    header = f"def {factory_name}({', '.join(params)}):"
    return header + "\n" + textwrap.indent(body, "    "), params


def _default_node(value: Any, param: str, params: dict[str, Any]) -> ast.expr:
    """A default value written in place when it is a plain literal, else passed in as a factory parameter."""
    text = literal(value)
    if text is not None:
        return ast.parse(text, mode="eval").body
    params[param] = value
    return ast.Name(param, ast.Load())


def _copy(node: ast.AST) -> Any:
    return ast.parse(ast.unparse(node)).body[0].value if isinstance(node, ast.Lambda) else \
        ast.parse(ast.unparse(node)).body[0]
