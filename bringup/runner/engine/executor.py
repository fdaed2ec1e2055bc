"""Runs the model for one scheduled step following the plan; owns the op and path fallbacks."""

from __future__ import annotations

import torch

from bringup.errors import StrictFallbackError, exception_line
from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.runner.engine.batch_inputs import BatchInputs, SeqChunk, build_inputs
from bringup.runner.engine.sequence import Sequence
from bringup.runner.model.attention import PAGED_DECODE, AttentionDispatcher, DecodeAttention
from bringup.runner.model.decoder import DecoderModel
from bringup.runner.model.linear_kinds import OUT_IN
from bringup.runner.model.linear_kinds import PANELS as HOST_KIND  # bringup's own kernel: may fault at run time
from bringup.runner.plan.plan import ExecutionPlan

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
        """Logits [B, vocab] (float32, on the model's device) of each sequence's last new token."""
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
        return self.model.logits(hidden)

    def _forward(self, inputs: BatchInputs) -> torch.Tensor:
        """The compiled forward for decode steps (one query per sequence: few shapes, launch-bound), the eager
        forward for prefill (many tokens, GEMM-bound), so the compiled graph does not recompile per prompt."""
        if self.compiled is not None and is_decode(inputs):
            try:
                return self.compiled(*decode_arguments(inputs))
            except StrictFallbackError:
                raise
            except Exception as exc:
                self.recorder.record("path", "model forward", wanted=f"torch.compile({self.plan.compiled.value})",
                                     instead="eager", why=exception_line(exc))
                self.compiled = None
        return self.model(inputs.input_ids, inputs.positions, inputs.meta)

    def warm_up(self) -> None:
        """Run a prefill and decodes on the first blocks so fallbacks surface before any request; a compiled
        forward meets the decode shapes it will see (one sequence, and several with ragged contexts) here, so
        it compiles at start-up, not on a request."""
        tokens = [0] * 8
        self.run_chunks([SeqChunk(tokens[:2], 0, [0])])
        self.run_chunks([SeqChunk(tokens[:3], 2, [0])])
        if self.compiled is not None and self.plan.kv_blocks.value >= 3:
            self.run_chunks([SeqChunk(tokens[:5], 0, [1]), SeqChunk(tokens[:7], 0, [2])])
            self.run_chunks([SeqChunk(tokens[:6], 5, [1]), SeqChunk(tokens[:8], 7, [2])])
            self.run_chunks([SeqChunk(tokens[:7], 6, [1]), SeqChunk(tokens[:3], 2, [0]), SeqChunk(tokens[:4], 3, [2])])


def is_decode(inputs: BatchInputs) -> bool:
    return inputs.meta.num_queries == 1 and inputs.meta.query_index is None


def decode_arguments(inputs: BatchInputs) -> tuple:
    """The forward's arguments with the batch and context dimensions marked dynamic: one compiled graph serves
    every batch size above one and every context length."""
    meta = inputs.meta
    for tensor, dims in ((inputs.input_ids, (0,)), (inputs.positions, (0,)), (meta.slot_mapping, (0,)),
                         (meta.context_slots, (0, 1)), (meta.context_lens, (0,)), (meta.mask, (1, 3))):
        if tensor is not None:
            for dim in dims:
                torch._dynamo.maybe_mark_dynamic(tensor, dim)
    return inputs.input_ids, inputs.positions, meta
