"""The runner's engine is what the server's one typed boundary asks for."""

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.serve.protocol import Engine
from tests.runner.stated import stated


def test_llm_engine_implements_the_servers_engine_protocol(tmp_path):
    engine = LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", max_model_len=32,
                                            max_num_seqs=1, measurements=stated()))
    assert isinstance(engine, Engine)
    assert engine.vocab_size == 264 and engine.max_model_len == 32
