"""Hostile model directories through the real CLI: a model directory is a jail (bringup/runner/model_files.py).

Every file the loader reads must resolve inside the directory (or, for a Hugging Face hub cache snapshot, inside its
repository's blobs/) and be a regular file, read under a cap; JSON must be UTF-8 and shallow; the weights must fit
free memory. Each case here is one line and exit 2. The outside files a case points at are FIFOs wherever the case
allows: opening one would block the loader for good (no writer ever comes), so a case that ends at all, under the
pytest timeout, proves the outside file was never opened; the others hold a secret the error must never show.
The helpers and the good model come from tests/cli/test_hostile_inputs.py.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import httpx
import psutil
import pytest

from tests.cli import test_hostile_inputs
from tests.cli.run_cli import run_cli
from tests.cli.test_hostile_inputs import WEIGHTS, Builder, Case, assert_one_line_error, copied, generate, serve
from tests.server.serve_live import free_port, spawn_cli, wait_healthy

good_model = test_hostile_inputs.good_model  # the fixture: one small random Llama directory per module
SECRET = "TOP-SECRET-do-not-print"
INDEX = "model.safetensors.index.json"
TEMPLATE = "chat_template.jinja"
OUTSIDE = ("resolves to", "outside the model directory")


# ---------------------------------------------------------------- building blocks


def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text(SECRET)
    return path


def outside_fifo(tmp_path: Path) -> Path:
    """A FIFO outside the model: the loader would block forever on opening it."""
    path = tmp_path / "outside.fifo"
    os.mkfifo(path)
    return path


def link_out(name: str, target: str = "fifo") -> Builder:
    """`name` in the model replaced by a symlink to a FIFO (or the secret file) outside the directory."""
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        outside = outside_fifo(tmp_path) if target == "fifo" else secret_file(tmp_path)
        (model / name).parent.mkdir(exist_ok=True)
        (model / name).unlink(missing_ok=True)
        (model / name).symlink_to(outside)
        return generate(model, tmp_path)

    return build


def outside_folder(name: str) -> Builder:
    """`name` in the model a symlink to a folder outside holding a FIFO `x.jinja`: not even listed."""
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        (tmp_path / "folder").mkdir()
        os.mkfifo(tmp_path / "folder" / "x.jinja")
        (model / name).symlink_to(tmp_path / "folder")
        return generate(model, tmp_path)

    return build


def special(name: str, make: str) -> Builder:
    """`name` in the model replaced by a FIFO, a directory or a link to nothing."""
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        (model / name).unlink(missing_ok=True)
        if make == "fifo":
            os.mkfifo(model / name)
        elif make == "directory":
            (model / name).mkdir()
        else:
            (model / name).symlink_to(model / "no-such-file")
        return generate(model, tmp_path)

    return build


def shards(*names: str, outside_weights: bool = False) -> Builder:
    """A shard index naming `names` (the real weights moved outside to ../outside.safetensors when asked)."""
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        if outside_weights:
            shutil.move(model / WEIGHTS, tmp_path / "outside.safetensors")
        secret_file(tmp_path), outside_fifo(tmp_path)
        resolved = [n.replace("{tmp}", str(tmp_path)) for n in names]
        (model / INDEX).write_text(json.dumps({"weight_map": {f"t{i}": n for i, n in enumerate(resolved)}}))
        return generate(model, tmp_path)

    return build


def raw_file(name: str, content: bytes) -> Builder:
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        (model / name).write_bytes(content)
        return generate(model, tmp_path)

    return build


def sized_file(name: str, size: int) -> Builder:
    """`name` grown (sparse) to `size` bytes."""
    def build(tmp_path: Path, good: Path) -> list[str]:
        model = copied(tmp_path, good)
        with (model / name).open("ab") as f:
            f.truncate(size)
        return generate(model, tmp_path)

    return build


def served(build: Builder) -> Builder:
    """The same directory given to `bringup serve`."""
    def build_serve(tmp_path: Path, good: Path) -> list[str]:
        argv = build(tmp_path, good)
        return serve(Path(argv[argv.index("--model") + 1]), tmp_path)

    return build_serve


def verify_ops(build: Builder) -> Builder:
    """The same directory given to `bringup verify-ops --model` (which reads its config.json for shapes)."""
    def build_verify(tmp_path: Path, good: Path) -> list[str]:
        argv = build(tmp_path, good)
        return ["verify-ops", "--model", argv[argv.index("--model") + 1], "--profile", str(tmp_path / "p.yaml")]

    return build_verify


DEEP = b"[" * 100_000 + b"]" * 100_000
DEEP_INDEX = b'{"weight_map": ' + DEEP + b"}"
NOT_UTF8 = b'{"model_type": "llama\xff\xfe"}'
ODD_SHARDS = json.dumps({"weight_map": {"a": "x\u0000y\u001b[2J", "b": "z" * 100_000, "c": "q", "d": "r"}}).encode()

# ---------------------------------------------------------------- the corpus

OUTSIDE_LINKS = [
    Case("chat_template.jinja links outside", link_out(TEMPLATE), (TEMPLATE, *OUTSIDE)),
    Case("chat_template.jinja links outside (serve)", served(link_out(TEMPLATE)), (TEMPLATE, *OUTSIDE)),
    Case("chat_template.jinja links to a secret", link_out(TEMPLATE, "secret"), (TEMPLATE, *OUTSIDE)),
    Case("additional template links outside", link_out("additional_chat_templates/tool_use.jinja"),
         ("tool_use.jinja", *OUTSIDE)),
    Case("additional_chat_templates links to an outside folder", outside_folder("additional_chat_templates"),
         ("additional_chat_templates", *OUTSIDE)),
    Case("config.json links outside", link_out("config.json"), ("config.json", *OUTSIDE)),
    Case("tokenizer.json links outside", link_out("tokenizer.json"), ("tokenizer.json", *OUTSIDE)),
    Case("tokenizer_config.json links outside", link_out("tokenizer_config.json"),
         ("tokenizer_config.json", *OUTSIDE)),
    Case("generation_config.json links outside", link_out("generation_config.json"),
         ("generation_config.json", *OUTSIDE)),
    Case("model.safetensors links outside", link_out(WEIGHTS), (WEIGHTS, *OUTSIDE)),
    Case("model.safetensors links outside (serve)", served(link_out(WEIGHTS)), (WEIGHTS, *OUTSIDE)),
    Case("shard index names ../outside.safetensors", shards("../outside.safetensors", outside_weights=True),
         ("../outside.safetensors", *OUTSIDE)),
    Case("shard index names an absolute path", shards("{tmp}/secret.txt"), ("secret.txt", *OUTSIDE)),
    Case("shard index names NUL, ESC and 10^5-character shards", raw_file(INDEX, ODD_SHARDS),
         ("missing: q, r, x\\x00y\\x1b[2J (and 1 more)",)),
    Case("shard index names the outside FIFO", shards("../outside.fifo"), ("outside.fifo", *OUTSIDE)),
]
SPECIAL_FILES = [
    Case("model.safetensors is a FIFO", special(WEIGHTS, "fifo"), (WEIGHTS, "FIFO", "not a regular file")),
    Case("model.safetensors is a FIFO (serve)", served(special(WEIGHTS, "fifo")), (WEIGHTS, "FIFO")),
    Case("config.json is a FIFO", special("config.json", "fifo"), ("config.json", "FIFO")),
    Case("tokenizer.json is a FIFO", special("tokenizer.json", "fifo"), ("tokenizer.json", "FIFO")),
    Case("chat_template.jinja is a FIFO", special(TEMPLATE, "fifo"), (TEMPLATE, "FIFO")),
    Case("config.json is a directory", special("config.json", "directory"), ("config.json", "directory")),
    Case("model.safetensors is a directory", special(WEIGHTS, "directory"), (WEIGHTS, "directory")),
    Case("tokenizer_config.json links to nothing", special("tokenizer_config.json", "dangling"),
         ("tokenizer_config.json", "link to nothing")),
]
UNREADABLE_JSON = [
    Case("config.json is not UTF-8", raw_file("config.json", NOT_UTF8), ("config.json", "not UTF-8", "byte 21")),
    Case("config.json nested 10^5 deep", raw_file("config.json", DEEP), ("config.json", "100000 levels", "64")),
    Case("config.json nested 10^5 deep (serve)", served(raw_file("config.json", DEEP)), ("config.json", "100000")),
    Case("shard index is not UTF-8", raw_file(INDEX, NOT_UTF8), (INDEX, "not UTF-8")),
    Case("shard index nested 10^5 deep", raw_file(INDEX, DEEP_INDEX), (INDEX, "levels deep")),
    Case("tokenizer_config.json nested 10^5 deep", raw_file("tokenizer_config.json", DEEP),
         ("tokenizer_config.json", "levels deep")),
    Case("generation_config.json is not UTF-8", raw_file("generation_config.json", NOT_UTF8),
         ("generation_config.json", "not UTF-8")),
    Case("tokenizer.json is not UTF-8", raw_file("tokenizer.json", NOT_UTF8), ("tokenizer.json", "not UTF-8")),
    Case("tokenizer.json nested 10^5 deep", raw_file("tokenizer.json", DEEP), ("tokenizer.json", "100000 levels")),
    Case("chat_template.jinja is not UTF-8", raw_file(TEMPLATE, b"{{ 1 }}\xff"), (TEMPLATE, "not UTF-8")),
    Case("chat_template.jinja over 4 MiB", sized_file(TEMPLATE, (4 << 20) + 1), (TEMPLATE, "larger than the 4 MiB")),
    Case("config.json over 64 MiB", sized_file("config.json", (64 << 20) + 1), ("config.json", "64 MiB")),
    Case("config.json nested 10^5 deep (verify-ops --model)", verify_ops(raw_file("config.json", DEEP)),
         ("config.json", "levels deep")),
    Case("config.json links outside (verify-ops --model)", verify_ops(link_out("config.json")),
         ("config.json", *OUTSIDE)),
    Case("safetensors header nested 10^5 deep",
         raw_file(WEIGHTS, struct.pack("<Q", len(DEEP)) + DEEP), (WEIGHTS, "levels deep")),
]
CORPUS = OUTSIDE_LINKS + SPECIAL_FILES + UNREADABLE_JSON


@pytest.mark.timeout(120)  # a case that opened an outside FIFO would block here until this fires
@pytest.mark.parametrize("case", CORPUS, ids=lambda case: case.name)
def test_hostile_model_directory_ends_in_one_line(case: Case, tmp_path: Path, good_model: Path) -> None:
    result = run_cli(case.build(tmp_path, good_model))
    assert_one_line_error(result, *case.fragments)
    assert SECRET not in result.stderr + result.stdout
    assert "TOP-SECR" not in result.stderr  # the first 8 bytes, read as a safetensors header length, once were


# ---------------------------------------------------------------- what stays allowed


def test_links_inside_the_directory_are_followed(tmp_path: Path, good_model: Path) -> None:
    model = copied(tmp_path, good_model)
    (model / "templates").mkdir()
    (model / "templates" / "chat.jinja").write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    (model / TEMPLATE).symlink_to("templates/chat.jinja")
    (model / "weights").mkdir()
    shutil.move(model / WEIGHTS, model / "weights" / WEIGHTS)
    (model / WEIGHTS).symlink_to(model / "weights" / WEIGHTS)  # absolute, but inside
    result = run_cli(generate(model, tmp_path, "--max-tokens", "2", "--json"))
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["completion_tokens"] == 2


def hub_snapshot(tmp_path: Path, good: Path) -> Path:
    """The model laid out as the Hugging Face hub cache lays it out: snapshots/<rev>/<file> -> ../../blobs/<hash>."""
    repo = tmp_path / "hub" / "models--org--tiny"
    snapshot = repo / "snapshots" / "0123abcd"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for i, file in enumerate(sorted(good.iterdir())):
        shutil.copy(file, repo / "blobs" / f"blob{i:02d}")
        (snapshot / file.name).symlink_to(Path("../../blobs") / f"blob{i:02d}")
    return snapshot


def test_a_hub_cache_snapshot_loads_through_its_blob_links(tmp_path: Path, good_model: Path) -> None:
    snapshot = hub_snapshot(tmp_path, good_model)
    result = run_cli(generate(snapshot, tmp_path, "--max-tokens", "2", "--json"))
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["completion_tokens"] == 2


def test_a_hub_cache_snapshot_may_not_link_past_its_blobs(tmp_path: Path, good_model: Path) -> None:
    snapshot = hub_snapshot(tmp_path, good_model)
    (snapshot / TEMPLATE).symlink_to(outside_fifo(tmp_path))
    assert_one_line_error(run_cli(generate(snapshot, tmp_path)), TEMPLATE, *OUTSIDE)
    (snapshot / TEMPLATE).unlink()
    (snapshot / TEMPLATE).symlink_to(Path("../../refs/main"))  # inside the repository, outside blobs/
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("0123abcd")
    assert_one_line_error(run_cli(generate(snapshot, tmp_path)), TEMPLATE, *OUTSIDE)


def test_a_look_alike_snapshot_without_blobs_gets_no_exception(tmp_path: Path, good_model: Path) -> None:
    """A directory merely named like a snapshot, whose repository has no blobs/ folder, is an ordinary jail."""
    snapshot = tmp_path / "repo" / "snapshots" / "rev"
    shutil.copytree(good_model, snapshot)
    (tmp_path / "repo" / "blobs").write_text("a file, not the blobs folder")
    (snapshot / TEMPLATE).symlink_to(Path("../../blobs"))
    assert_one_line_error(run_cli(generate(snapshot, tmp_path)), TEMPLATE, *OUTSIDE)


# ---------------------------------------------------------------- weights larger than free memory

HUGE = {"vocab_size": 1 << 20, "hidden_size": 1 << 16, "intermediate_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 1 << 16, "tie_word_embeddings": True}


def sparse_weights(path: Path, shapes: dict[str, list[int]]) -> int:
    """A valid float16 safetensors file of `shapes` whose data is a hole (no disk used); its element count."""
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * _numel(shape)
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + offset)
    return offset // 2


def _numel(shape: list[int]) -> int:
    n = 1
    for dim in shape:
        n *= dim
    return n


@pytest.mark.timeout(120)  # reading the hole (to scan it for NaN, or to load it) would take far longer
def test_weights_larger_than_free_memory_are_refused_before_any_is_read(tmp_path: Path, good_model: Path) -> None:
    model = copied(tmp_path, good_model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, **HUGE}))
    h, v, i = HUGE["hidden_size"], HUGE["vocab_size"], HUGE["intermediate_size"]
    p = "model.layers.0."
    shapes = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h],
              p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
              **{p + f"self_attn.{x}_proj.weight": [h, h] for x in "qkvo"},
              p + "mlp.gate_proj.weight": [i, h], p + "mlp.up_proj.weight": [i, h], p + "mlp.down_proj.weight": [h, i]}
    numel = sparse_weights(model / WEIGHTS, shapes)
    if psutil.virtual_memory().available >= 2 * numel:  # float16 is the smallest dtype the runner holds weights in
        pytest.skip(f"this machine has {psutil.virtual_memory().available} bytes free, enough for the weights")
    result = run_cli(generate(model, tmp_path))
    assert_one_line_error(result, "the weights need", "GiB", "free", "nothing was loaded")
    assert "NaN/Inf" not in result.stderr  # refused before the value scan read a weight


# ---------------------------------------------------------------- a live server never starts on a leaking model


def test_serve_refuses_a_symlinked_chat_template_and_never_listens(tmp_path: Path, good_model: Path) -> None:
    """The /tokenize -> /detokenize leak: a template linked to an outside file rendered its text into tokens any
    client could decode. The server now refuses to start, in one line; the same template as a file inside the
    directory serves, and its text round-trips, which is what the link would have leaked."""
    secret = secret_file(tmp_path)
    template = "{{ '" + SECRET + "' }}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    secret.write_text(template)
    model = copied(tmp_path, good_model)
    (model / TEMPLATE).symlink_to(secret)
    port = free_port()
    args = ["serve", "--model", str(model), "--device", "cpu", "--profile", str(tmp_path / "none.yaml"),
            "--host", "127.0.0.1", "--port", str(port)]
    proc = spawn_cli(args, tmp_path)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in stderr, stderr
    assert TEMPLATE in errors[0] and "outside the model directory" in errors[0]
    assert SECRET not in stdout + stderr
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)

    (model / TEMPLATE).unlink()
    (model / TEMPLATE).write_text(template)  # the control: the same text, inside the directory
    proc = spawn_cli(args, tmp_path)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, timeout=120, proc=proc)
        messages = [{"role": "user", "content": "hi"}]
        tokens = httpx.post(f"{url}/tokenize", json={"messages": messages}, timeout=30).json()["tokens"]
        text = httpx.post(f"{url}/detokenize", json={"tokens": tokens}, timeout=30).json()["prompt"]
        assert SECRET in text
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
