"""Runs the model for one scheduled step following the plan; owns the op and path fallbacks."""

from __future__ import annotations

import torch

from bringup.errors import StrictFallbackError, exception_line
from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.runner.attention import PAGED_DECODE, AttentionDispatcher, DecodeAttention
from bringup.runner.batch_inputs import BatchInputs, SeqChunk, build_inputs
from bringup.runner.linear_kinds import OUT_IN
from bringup.runner.linear_kinds import PANELS as HOST_KIND  # bringup's own kernel: may fault at run time
from bringup.runner.model import DecoderModel
from bringup.runner.plan import ExecutionPlan
from bringup.runner.sequence import Sequence

log = get_logger("runner.executor")


class Executor:
    def __init__(self, model: DecoderModel, plan: ExecutionPlan, recorder: FallbackRecorder) -> None:
        self.model, self.plan, self.recorder = model, plan, recorder
        names = [name for name in plan.attention.value if name != PAGED_DECODE]
        self.attention = AttentionDispatcher(names, recorder)
        model.attend = self.attention
        if PAGED_DECODE in plan.attention.value:
            model.decode_attend = DecodeAttention(recorder, instead=f"gather + {names[0]}")
        self.compiled = None
        if plan.compiled.value:
            self.compiled = torch.compile(model.forward, backend=plan.compiled.value, dynamic=True)

    @property
    def attention_in_use(self) -> str:
        """The attention implementations running now (after any op fallback)."""
        decode = self.model.decode_attend
        if isinstance(decode, DecodeAttention) and decode.enabled:
            return f"{PAGED_DECODE} (decode steps) + {self.attention.current}"
        return self.attention.current

    def run(self, seqs: list[Sequence]) -> torch.Tensor:
        """Logits [B, vocab] (float32, CPU) of each sequence's last new token."""
        chunks = [SeqChunk(s.token_ids, s.num_cached_tokens, s.block_table) for s in seqs]
        return self.run_chunks(chunks)

    def run_chunks(self, chunks: list[SeqChunk], all_positions: bool = False) -> torch.Tensor:
        m = self.model
        inputs = build_inputs(chunks, self.plan.block_size, m.config.num_queries_per_kv, m.device)
        with torch.inference_mode():
            try:
                return self._logits(inputs, all_positions)
            except StrictFallbackError:
                raise
            except Exception as exc:
                if HOST_KIND not in m.layout.kinds:
                    raise
                self.recorder.record("op", "linear", wanted=HOST_KIND, instead=OUT_IN, why=exception_line(exc))
                m.replace_kind(HOST_KIND, OUT_IN)
                return self._logits(inputs, all_positions)  # rewrites the same K/V into the same slots

    def _logits(self, inputs: BatchInputs, all_positions: bool) -> torch.Tensor:
        hidden = self._forward(inputs)
        if not all_positions:
            hidden = hidden[inputs.last_index]
        return self.model.logits(hidden).cpu()

    def _forward(self, inputs: BatchInputs) -> torch.Tensor:
        if self.compiled is not None:
            try:
                return self.compiled(inputs.input_ids, inputs.positions, inputs.meta)
            except StrictFallbackError:
                raise
            except Exception as exc:
                self.recorder.record("path", "model forward", wanted=f"torch.compile({self.plan.compiled.value})",
                                     instead="eager", why=exception_line(exc))
                self.compiled = None
        return self.model(inputs.input_ids, inputs.positions, inputs.meta)

    def warm_up(self) -> None:
        """Run a 2-token prefill and a decode on block 0 so fallbacks surface before any request."""
        tokens = [0, 0, 0]
        self.run_chunks([SeqChunk(tokens[:2], 0, [0])])
        self.run_chunks([SeqChunk(tokens, 2, [0])])
