"""`python -m bringup_emu build` builds the extension once; `python -m bringup_emu info` prints spec and build."""

from __future__ import annotations

import json
import os
import sys

# this process never activates the device: build imports the library it made, info only reads
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

USAGE = "usage: python -m bringup_emu {build [-v] | info [--json]}"


def _build(verbose: bool) -> int:
    from bringup_emu.build import BuildError, build

    try:
        path, seconds = build(verbose=verbose)
    except BuildError as error:
        print(f"error: cannot build the emulator extension: {error}; install g++ and ninja, then retry",
              file=sys.stderr)
        return 2
    how = f"built in {seconds:.1f} s" if seconds else "already built"
    print(f"bringup-emu: {how}: {path}")
    return 0


def _info(as_json: bool) -> int:
    import torch

    from bringup_emu.build import build_root, compiler, library_path
    from bringup_emu.spec import SPEC_ENV, SpecError, load_spec

    value = os.environ.get(SPEC_ENV)
    spec = None
    if value:
        try:
            spec = load_spec(value).as_dict()
        except SpecError as error:
            print(f"error: {SPEC_ENV}: {error} (see docs/emulator.md)", file=sys.stderr)
            return 2
    library = library_path(torch.__version__)
    info = {
        "spec_env": value,
        "spec": spec,
        "build": {"root": str(build_root()), "library": str(library), "built": library.exists(),
                  "compiler": compiler(), "torch": torch.__version__},
    }
    if as_json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{SPEC_ENV}: {value or '(unset: the emu device is dormant)'}")
    if spec:
        for index, device in enumerate(spec["devices"]):
            kind = "integrated" if device["integrated"] else "discrete"
            print(f"  emu:{index}  {device['name']}  {kind}  {device['memory']} bytes")
        print(f"  refused dtypes: {', '.join(spec['refused_dtypes']) or '-'}")
        print(f"  native ops: {', '.join(spec['native']) or '-'}")
        print(f"  wrong ops: {', '.join(f'{k} x{v}' for k, v in spec['wrong'].items()) or '-'}")
        print(f"  abort ops: {', '.join(spec['abort']) or '-'}")
        print(f"  numeric variants: {', '.join(f'{k} {v}' for k, v in spec['numerics'].items()) or '-'}")
    state = "built" if info["build"]["built"] else "not built (python -m bringup_emu build)"
    cxx = info["build"]["compiler"] or "none found"
    print(f"build: {library} ({state}); compiler {cxx}; torch {torch.__version__}")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"] and set(argv[1:]) <= {"-v", "--verbose"}:
        return _build(verbose=bool(argv[1:]))
    if argv[:1] == ["info"] and set(argv[1:]) <= {"--json"}:
        return _info(as_json=bool(argv[1:]))
    print(f"error: unknown command {' '.join(argv) or '(none)'}; {USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
