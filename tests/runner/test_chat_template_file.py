"""--chat-template FILE: a user's Jinja template renders chats in place of the model's (a GGUF file without one, a
directory without one), read within the template limits; a bad file is refused in one line before the model loads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder
from bringup.runner.model_files import MAX_TEMPLATE_BYTES
from bringup.runner.text.chat_template import ChatTemplateError, template_from_file
from bringup.runner.text.tokenizer import HFTokenizer
from tests.cli.run_cli import run_cli
from tests.runner.test_chat_templates import FAMILIES, write_tokenizer_dir

TURNS = ("{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}"
         "{% if add_generation_prompt %}[bot]{% endif %}")
MESSAGES = [{"role": "user", "content": "hi"}]


def test_a_directory_without_a_template_uses_the_given_one_and_records_no_fallback(tmp_path):
    (tmp_path / "t.jinja").write_text(TURNS)
    tok = HFTokenizer.from_dir(write_tokenizer_dir(tmp_path / "none", FAMILIES["phi3"], None))
    tok.fallbacks = FallbackRecorder(strict=True)  # the plain fallback would raise here
    tok.use_chat_template(template_from_file(tmp_path / "t.jinja"))
    assert tok.apply_chat_template(MESSAGES) == "[user]hi[bot]"
    assert tok.fallbacks.events == []


@pytest.mark.parametrize("content, words", [
    (None, "does not exist"),
    (b"x" * (MAX_TEMPLATE_BYTES + 1), "holds more than the 4,194,304 bytes a chat template may"),
    (b"{{ messages }}\xff", "not UTF-8"),
])
def test_a_bad_template_file_is_refused_in_one_line(tmp_path, content, words):
    path = tmp_path / "t.jinja"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(BringupError, match=words) as caught:
        template_from_file(path)
    assert "\n" not in str(caught.value) and "--chat-template" in str(caught.value)


@pytest.mark.parametrize("target, words", [
    ("/proc/self/mem", "a file of the kernel"),
    ("/proc/self/pagemap", "a file of the kernel"),
    ("/dev/zero", "is a character device, not a regular file"),
    ("{tmp}", "is a directory, not a regular file"),
    ("{tmp}/fifo", "is a FIFO, not a regular file"),
])
def test_a_template_path_that_is_no_regular_file_is_refused_in_one_line(tmp_path, target, words):
    os.mkfifo(tmp_path / "fifo")  # opened without blocking: never waited on
    path = Path(target.format(tmp=tmp_path))
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist on this system")
    with pytest.raises(BringupError, match=words) as caught:
        template_from_file(path)
    assert "\n" not in str(caught.value) and "Errno" not in str(caught.value)


def test_a_template_that_does_not_compile_names_the_file_and_line(tmp_path):
    path = tmp_path / "t.jinja"
    path.write_text("{% for m in messages %}\n{{ m['content'] }")
    with pytest.raises(ChatTemplateError, match=rf"{path}.*does not compile \(line 2"):
        template_from_file(path)


def test_generate_renders_the_chat_with_the_given_template(tmp_path):
    template = tmp_path / "t.jinja"
    template.write_text("{{ bos_token }}" + TURNS)
    args = ["generate", "--chat", "--chat-template", str(template), "--max-tokens", "4", "--device", "cpu",
            "--profile", str(tmp_path / "p.yaml"), "--json", "hello"]
    result = run_cli(args)
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["prompt_tokens"] == len("[user]hello[bot]") + 1  # the byte tokenizer: <|bos|>, then one id a byte
    assert doc["fallbacks"]["events"] == []


def test_generate_refuses_a_missing_template_with_exit_2(tmp_path):
    result = run_cli(["generate", "--chat", "--chat-template", str(tmp_path / "absent.jinja"), "--device", "cpu",
                      "--profile", str(tmp_path / "p.yaml"), "hello"])
    assert result.code == 2
    assert result.stderr.strip().count("\n") == 0 and "does not exist" in result.stderr
