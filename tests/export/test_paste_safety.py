"""No line export prints runs anything when pasted: the command and every `run ...` hint are quoted alike, a path
that starts with `-` is written `./-x`, and a path no single line can hold is refused in one line.

Each pasteable line goes through `bash -n`, through `shlex.split` (its tokens checked), and is then run by bash with
the programs it names defined as shell functions that print their arguments: the arguments must come back as the
tokens, and no file that a `$(...)` or a backtick in a path would make may appear."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from bringup.errors import BringupError
from bringup.export import export_config
from bringup.export.config import EngineConfig
from bringup.export.render import shell_line, text_lines
from tests.export.built import gguf_file, model_dir, tuned, verified, with_plan

NAMES = ["my model $(touch made-by-dollar)", "a`touch made-by-backtick`b", "it's \"quoted\" $HOME", "-x",
         "--trust-remote-code", "semi;colon && touch made-by-and | cat"]
ENGINES = {"vllm": ("python", "--model"), "llama.cpp": ("llama-server", "-m")}
FAKES = "bringup() { printf '<%s>\\n' \"$@\"; }; python() { bringup \"$@\"; }; llama-server() { bringup \"$@\"; }\n"
BASH = shutil.which("bash")


def model_at(name: str, engine: str) -> str:
    """A model the engine loads, under `name` relative to the working directory (a test's own temp dir)."""
    if engine == "vllm":
        folder = model_dir(Path("."))
        folder.rename(name)
    else:
        gguf_file(Path(".")).rename(name + ".gguf")
        name += ".gguf"
    return name


def hints(config: EngineConfig) -> list[str]:
    said = [o.to_get for o in config.omitted] + [n.to_get for n in config.notes]
    return [text.removeprefix("run `").removesuffix("`") for text in said if text and text.startswith("run `")]


def pasted(line: str) -> list[str]:
    """What the programs of `line` receive when bash runs it, each one a function that prints its arguments."""
    done = subprocess.run([BASH, "-c", FAKES + line], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return [arg.removeprefix("<").removesuffix(">") for arg in done.stdout.splitlines()]


def check_pastes(line: str, expected: list[str], printed: str, variables: int = 0) -> None:
    """`line` is printed, parses, splits into `expected` (`variables` assignments, the program, its arguments) and,
    run, gives the program exactly those arguments."""
    assert line in printed
    assert subprocess.run([BASH, "-n"], input=line, text=True, timeout=10).returncode == 0
    assert shlex.split(line) == expected
    assert pasted(line) == expected[variables + 1:]


@pytest.mark.skipif(BASH is None, reason="no bash to paste into")
@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("recorded", [False, True], ids=["given", "recorded"])
def test_every_pasteable_line_runs_only_what_it_says(engine, name, recorded) -> None:
    path = model_at(name, engine)
    word = f"./{path}" if path.startswith("-") else path
    profile = verified()
    if recorded:
        profile = with_plan(profile, tuned(path, dtype="float16"))
    config = export_config(profile, engine, None if recorded else path)
    printed = "\n".join(text_lines(config))
    program, flag = ENGINES[engine]
    line = shell_line(config)
    assert program in line
    tokens = shlex.split(line)
    assert tokens[tokens.index(flag) + 1] == word
    check_pastes(line, tokens, printed, len(config.environment))
    assert tokens[len(config.environment):] == config.argv
    for hint in hints(config):
        words = shlex.split(hint)
        assert words[:2] == ["bringup", "tune"] or "--model" not in words
        if "--model" in words:
            assert words[words.index("--model") + 1] == word
        check_pastes(hint, words, printed)
    assert not [p.name for p in Path(".").iterdir() if p.name.startswith("made-by")]


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_path_no_line_can_hold_is_refused_in_one_line(engine) -> None:
    path = model_at("two\nlines", engine)
    with pytest.raises(BringupError, match="holds a newline or another control character") as caught:
        export_config(verified(), engine, path)
    assert "\n" not in str(caught.value)
    with pytest.raises(BringupError, match=r"models\[.*\]\.source") as caught:
        export_config(with_plan(verified(), tuned(path)), engine)
    assert "\n" not in str(caught.value)
