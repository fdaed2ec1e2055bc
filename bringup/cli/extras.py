"""Which optional extra brings a package: the core (stages, profile, report) needs torch, typer, rich, pyyaml,
pydantic, filelock, psutil and numpy only (docs/install.md says why each); a command that needs more says in one
line which extra to install."""

from __future__ import annotations

EXTRA_OF_PACKAGE = {
    # the runner (selftest, generate, eval, bench's e2e group) and the server
    "safetensors": "serve",
    "tokenizers": "serve",
    "jinja2": "serve",
    "fastapi": "serve",
    "starlette": "serve",
    "uvicorn": "serve",
    "prometheus_client": "serve",
    # GGUF model files
    "gguf": "gguf",
}


def missing_extra_message(module: str | None, command: str | None) -> str | None:
    """The one-line error for a missing optional package, or None when `module` belongs to no extra."""
    package = (module or "").split(".", 1)[0]
    extra = EXTRA_OF_PACKAGE.get(package)
    if extra is None:
        return None
    needs = f"`bringup {command}`" if command else "this command"
    return f"{needs} needs {package}, which is not installed; install the {extra} extra: pip install 'bringup[{extra}]'"
