"""Proof that generated source is faithful: the same code, closures, defaults and globals as the catalog's
objects, and the same inputs bit for bit. Raises NotExpressible naming the first difference."""

from __future__ import annotations

import dataclasses
import dis
import inspect
import types
from collections.abc import Iterator
from typing import Any

import torch

from bringup.probes.ops.repro.extract import NotExpressible


def _global_names(code: types.CodeType) -> Iterator[str]:
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            yield ins.argval
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def _same_code(a: types.CodeType, b: types.CodeType) -> bool:
    plain = ("co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_argcount",
             "co_kwonlyargcount", "co_posonlyargcount")
    if any(getattr(a, attr) != getattr(b, attr) for attr in plain) or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not _same_code(x, y):
                return False
        elif type(x) is not type(y) or repr(x) != repr(y):
            return False
    return True


class Comparer:
    """Structural equality of an original object and its regenerated twin (cycles allowed)."""

    def __init__(self, substituted: frozenset[tuple[str, str]] = frozenset()) -> None:
        self._seen: set[tuple[int, int]] = set()
        self.substituted = substituted  # (module, name) of originals deliberately replaced by standalone code

    def same(self, a: Any, b: Any, where: str) -> None:
        if a is b:
            return
        key = (id(a), id(b))
        if key in self._seen:
            return
        self._seen.add(key)
        if (getattr(a, "__module__", None), getattr(a, "__name__", None)) in self.substituted:
            return
        if inspect.isfunction(a) and inspect.isfunction(b):
            self._same_function(a, b, where)
        elif isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            same_tensor(a, b, where)
        elif inspect.isclass(a) and inspect.isclass(b):
            self._same_class(a, b, where)
        elif isinstance(a, dict) and isinstance(b, dict):
            if list(a) != list(b):
                raise NotExpressible(f"{where}: different keys")
            for k in a:
                self.same(a[k], b[k], f"{where}[{k!r}]")
        elif isinstance(a, (list, tuple)) and type(a) is type(b) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                self.same(x, y, f"{where}[{i}]")
        elif dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b) and not isinstance(a, type):
            self.same(type(a), type(b), f"{where} type")
            for f in dataclasses.fields(a):
                self.same(getattr(a, f.name), getattr(b, f.name, None), f"{where}.{f.name}")
        elif type(a) is not type(b) or repr(a) != repr(b):
            raise NotExpressible(f"{where}: {a!r} became {b!r}")

    def _same_function(self, a: types.FunctionType, b: types.FunctionType, where: str) -> None:
        if not _same_code(a.__code__, b.__code__):
            raise NotExpressible(f"{where}: the regenerated code of {a.__qualname__} differs")
        self.same(a.__defaults__, b.__defaults__, f"{where} defaults")
        self.same(a.__kwdefaults__, b.__kwdefaults__, f"{where} keyword defaults")
        for name, x, y in zip(a.__code__.co_freevars, a.__closure__ or (), b.__closure__ or ()):
            self.same(x.cell_contents, y.cell_contents, f"{where} closure {name}")
        builtins = vars(__builtins__) if isinstance(__builtins__, types.ModuleType) else __builtins__
        for name in dict.fromkeys(_global_names(a.__code__)):
            if name in a.__globals__:
                if name not in b.__globals__:
                    raise NotExpressible(f"{where}: global {name!r} is missing")
                self.same(a.__globals__[name], b.__globals__[name], f"{where} global {name}")
            elif name not in builtins:
                raise NotExpressible(f"{where}: global {name!r} is undefined in the original")

    def _same_class(self, a: type, b: type, where: str) -> None:
        if a.__name__ != b.__name__:
            raise NotExpressible(f"{where}: class {a.__name__} became {b.__name__}")
        if dataclasses.is_dataclass(a) != dataclasses.is_dataclass(b):
            raise NotExpressible(f"{where}: class {a.__name__} lost its dataclass form")
        for name, member in vars(a).items():
            if inspect.isfunction(member):
                self.same(member, vars(b).get(name), f"{where}.{name}")


def same_tensor(a: torch.Tensor, b: torch.Tensor, where: str) -> None:
    if a.dtype != b.dtype or a.shape != b.shape or a.stride() != b.stride() or a.device != b.device:
        raise NotExpressible(f"{where}: tensor {a.dtype}{list(a.shape)} became {b.dtype}{list(b.shape)}")
    if a.is_floating_point():
        equal = (a == b) | (a.isnan() & b.isnan())
        signs = torch.signbit(a) == torch.signbit(b)
        if not bool((equal & signs).all()):
            raise NotExpressible(f"{where}: tensor values differ")
    elif not torch.equal(a, b):
        raise NotExpressible(f"{where}: tensor values differ")


def same_arguments(original: list[Any], regenerated: list[Any], where: str) -> None:
    """Inputs (or laid-out inputs) bit for bit: dtype, shape, strides and every value."""
    if len(original) != len(regenerated):
        raise NotExpressible(f"{where}: {len(original)} arguments became {len(regenerated)}")
    Comparer().same(list(original), list(regenerated), where)
