"""Runs the model for one scheduled step following the plan; owns the op and path fallbacks."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import torch

from bringup.errors import StrictFallbackError, exception_line
from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.profiles.attention_kinds import PAGED_DECODE
from bringup.runner.engine.context_check import check_context_attention
from bringup.runner.engine.prompt_logprobs import ScoredPrompt, score_prompt
from bringup.runner.engine.sequence import Sequence
from bringup.runner.host.paged_decode import DecodeAttention
from bringup.runner.model.attention import AttentionDispatcher
from bringup.runner.model.batch_inputs import (
    BatchInputs,
    SeqChunk,
    build_inputs,
    build_mixed_inputs,
    decode_rows,
)
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.model.moe import (
    DENSE,
    EXPERT_PATHS,
    GROUPED,
    GroupedPathError,
    keep_grouped_eager_under_compile,
    sparse_blocks,
    use_expert_path,
)
from bringup.runner.plan.host_kernels import PAGED, every_step_attention
from bringup.runner.plan.plan import FUSED, ExecutionPlan
from bringup.runner.weights.kernels import panels as panel_kernel
from bringup.runner.weights.kernels.build import HostKernelInputError
from bringup.runner.weights.kinds import OUT_IN
from bringup.runner.weights.kinds import PANELS as HOST_KIND  # bringup's own kernel: may fault at run time

if TYPE_CHECKING:
    from bringup.runner.engine.graphs.decode_graphs import DecodeGraphs
    from bringup.runner.host.decode_layers import FusedDecode
    from bringup.runner.host.prompt_layers import FusedPrompt

log = get_logger("runner.executor")
# graphs one compiled forward may hold (decode with and without a padding mask, one-row and larger batches, each
# weight kind in use); past it torch.compile would run eager without a word, so it raises and the executor
# records the path fallback instead
RECOMPILE_LIMIT = 32
PADDING_LIMIT = 2.0  # attention work a group of prompts may pad to, as a multiple of what its chunks need
MAX_PROMPT_GROUPS = 4


class Executor:
    def __init__(self, model: DecoderModel, plan: ExecutionPlan, recorder: FallbackRecorder) -> None:
        self.model, self.plan, self.recorder = model, plan, recorder
        names = every_step_attention(plan.attention.value)
        self.attention = AttentionDispatcher(names, recorder)
        model.attend = self.attention
        model.causal_attend = self.attention.causal
        check_context_attention(self.attention, model)
        model.context_attend = self.attention.with_context
        if PAGED_DECODE in plan.attention.value:
            model.decode_attend = DecodeAttention(recorder, instead=f"gather + {names[0]}")
        if plan.experts.value in EXPERT_PATHS:
            use_expert_path(model, plan.experts.value)
        self.compiled = None
        if plan.compiled.value:
            keep_grouped_eager_under_compile()
            self.compiled = torch.compile(model.forward, backend=plan.compiled.value, dynamic=True)
        self.fused: FusedDecode | None = None  # every layer of a decode step in one call (set by start-up)
        self.prompt: FusedPrompt | None = None  # the other steps' element-wise parts in host kernels (start-up)
        self.graphs: DecodeGraphs | None = None  # decode steps replayed from captured graphs (set by start-up)
        # a step past the fused decode layers' rows runs as two forwards from this average context of its decodes
        # (plan/mixed_steps.py; None: one forward)
        self.split_from: int | None = None

    def follow(self, plan: ExecutionPlan) -> None:
        """Run what the confirmed `plan` kept, of the candidates this executor was built with (and start-up or the
        timing gave it): the one place plan settings become executor state after construction."""
        model = self.model
        if plan.compiled.value is None:
            self.compiled = None
        if plan.decode_layers.value != FUSED:
            self.fused = None
        if plan.prompt_layers.value != FUSED:
            self.prompt = None
        if not plan.graphs.value:
            self.graphs = None
        self.split_from = plan.mixed_steps.value
        if PAGED not in plan.attention.value:
            model.decode_attend = None
        if plan.experts.value == DENSE and sparse_blocks(model):
            use_expert_path(model, DENSE)
        if plan.weight_layout.value == OUT_IN and model.layout.kinds != [OUT_IN] and OUT_IN in model.stored_kinds:
            model.use_layout(WeightLayout(OUT_IN, OUT_IN, 0))
        else:
            model.use_layout(model.layout)  # frees a plain copy made only for the check
        self.plan = plan

    @property
    def attention_in_use(self) -> str:
        """The attention implementations running now (after any op fallback)."""
        decode = self.model.decode_attend
        if isinstance(decode, DecodeAttention) and decode.enabled:
            return f"{PAGED_DECODE} (decode steps) + {self.attention.current}"
        return self.attention.current

    def run(self, seqs: list[Sequence]) -> torch.Tensor:
        """Logits [B, vocab] (float32, on the model's device) of each sequence's last new token."""
        return self.run_scoring(seqs, [])[0]

    def run_scoring(self, seqs: list[Sequence], scored: list[int]) -> tuple[torch.Tensor, dict[int, ScoredPrompt]]:
        """run(), and the prompt logprobs of the `scored` rows (row -> scores of the tokens after the first new
        one), from the same forward: only those rows pay for logits at every position, the others are unchanged."""
        chunks = [SeqChunk(s.token_ids if s.step_end == len(s.token_ids) else s.token_ids[:s.step_end],
                           s.num_cached_tokens, s.block_table) for s in seqs]
        return self._run_groups(chunks, False, {i: seqs[i].params.prompt_logprobs or 0 for i in scored})

    def run_chunks(self, chunks: list[SeqChunk], all_positions: bool = False) -> torch.Tensor:
        """Logits of each chunk's last token ([len(chunks), vocab]), or of every new token (`all_positions`).

        Attention pads every sequence's queries and context to the step's longest, so a step of very unequal
        chunks attends in a few groups of similar ones (`forward_groups`): the decodes apart (one query each, the
        fast decode path), prompts of similar lengths together, all in one forward (a mixed step)."""
        return self._run_groups(chunks, all_positions, {})[0]

    def _run_groups(self, chunks: list[SeqChunk], all_positions: bool,
                    scored: dict[int, int]) -> tuple[torch.Tensor, dict[int, ScoredPrompt]]:
        """scored: chunk index -> how many top alternatives its prompt logprobs list. Scoring reads the hidden
        states the step computes anyway, so a scored prompt changes nothing for the others of its step."""
        groups = [list(range(len(chunks)))] if all_positions else forward_groups(chunks)
        if len(groups) == 1:
            return self._run_together(chunks, all_positions, scored)
        as_rows = self._run_as_rows(chunks, scored)
        if as_rows is not None:
            return as_rows
        if self._splits(chunks, groups[0], scored):
            return self._run_split(chunks, groups[0], scored)
        # one forward: each group attends apart, every weight read once
        order = [i for group in groups for i in group]
        where = {i: j for j, i in enumerate(order)}
        mixed, scores = self._run_together([chunks[i] for i in order], False,
                                           {where[i]: top_k for i, top_k in scored.items()}, [len(g) for g in groups])
        logits = torch.empty_like(mixed)
        logits[order] = mixed
        return logits, {order[j]: score for j, score in scores.items()}

    def _run_as_rows(self, chunks: list[SeqChunk],
                     scored: dict[int, int]) -> tuple[torch.Tensor, dict[int, ScoredPrompt]] | None:
        """Logits of a step of decodes and prompt chunks run by the fused decode kernel, each prompt token a row of
        its own (batch_inputs.decode_rows), where the kernel serves that many rows; else None."""
        rows, last = decode_rows(chunks)
        if self.fused is None or not self.fused.serves(len(rows)):
            return None
        m = self.model
        inputs = build_inputs(rows, self.plan.block_size, m.config.num_queries_per_kv, m.device,
                              m.config.attention_window)
        with torch.inference_mode():
            hidden = self._fused_hidden(inputs)
            if hidden is None or self.fused is None:  # its fallback recorded: the modules rewrite the same slots
                return None
            head = functools.partial(m.logits, kind=self.fused.kind)
            firsts = [0, *(row + 1 for row in last[:-1])]
            scores = {i: score_prompt(head, hidden[firsts[i]:last[i]], chunks[i].token_ids, chunks[i].start, top_k)
                      for i, top_k in scored.items()}
            return head(hidden[torch.tensor(last, device=m.device)]), scores

    def _splits(self, chunks: list[SeqChunk], decodes: list[int], scored: dict[int, int]) -> bool:
        """Whether this step (past the fused kernel's rows: _run_as_rows declined) runs its decodes through the
        fused decode layers and its prompts as a forward of their own (plan/mixed_steps.py)."""
        if self.split_from is None or self.fused is None or len(decodes) == len(chunks) \
                or any(len(chunks[i].token_ids) - chunks[i].start > 1 or i in scored for i in decodes):
            return False
        context = sum(len(chunks[i].token_ids) for i in decodes) // max(len(decodes), 1)
        return bool(decodes) and context >= self.split_from and self.fused.serves(len(decodes))

    def _run_split(self, chunks: list[SeqChunk], decodes: list[int],
                   scored: dict[int, int]) -> tuple[torch.Tensor, dict[int, ScoredPrompt]]:
        """The decodes' forward, then the prompts' (each group of them attending apart), the logits in step order."""
        prompts = [i for i in range(len(chunks)) if i not in set(decodes)]
        where = {i: j for j, i in enumerate(prompts)}
        decoded, _ = self._run_together([chunks[i] for i in decodes], False, {})
        prompted, scores = self._run_groups([chunks[i] for i in prompts], False,
                                            {where[i]: top_k for i, top_k in scored.items()})
        logits = torch.empty((len(chunks), decoded.shape[1]), dtype=decoded.dtype, device=decoded.device)
        logits[decodes] = decoded
        logits[prompts] = prompted
        return logits, {prompts[j]: score for j, score in scores.items()}

    def _run_together(self, chunks: list[SeqChunk], all_positions: bool, scored: dict[int, int],
                      parts: list[int] | None = None) -> tuple[torch.Tensor, dict[int, ScoredPrompt]]:
        """One forward over `chunks`; `parts`: the sizes of consecutive groups that attend apart (a mixed step)."""
        m = self.model
        if self.graphs is not None and not all_positions and not scored and parts is None:
            with torch.inference_mode():
                replayed = self.graphs.logits(chunks)
            if replayed is not None:
                return replayed, {}
        shape = self.plan.block_size, m.config.num_queries_per_kv, m.device, m.config.attention_window
        inputs = build_inputs(chunks, *shape) if parts is None else build_mixed_inputs(split_sizes(chunks, parts),
                                                                                       *shape)
        with torch.inference_mode():
            try:
                return self._logits(inputs, all_positions, chunks, scored)
            except StrictFallbackError:
                raise
            except Exception as exc:
                if isinstance(exc, GroupedPathError):
                    self.recorder.record("op", "experts", wanted=GROUPED, instead=DENSE, why=exception_line(exc))
                    use_expert_path(m, DENSE)
                    return self._run_together(chunks, all_positions, scored, parts)  # a linear fallback may follow
                if HOST_KIND not in m.layout.kinds or not panel_kernel.raised_here(exc):
                    raise  # not the panels kernel's: no fallback of its to take
                self.recorder.record("op", "linear", wanted=HOST_KIND, instead=OUT_IN, why=exception_line(exc))
                self.fused = None  # it reads the panels
                m.replace_kind(HOST_KIND, OUT_IN)
                return self._logits(inputs, all_positions, chunks, scored)  # rewrites the same K/V into the same slots

    def _logits(self, inputs: BatchInputs, all_positions: bool, chunks: list[SeqChunk],
                scored: dict[int, int]) -> tuple[torch.Tensor, dict[int, ScoredPrompt]]:
        if not scored and self.fused is not None and is_decode(inputs) \
                and self.fused.serves(inputs.input_ids.shape[0]):
            hidden = self._fused_hidden(inputs)
            if hidden is not None:  # the head through the kind the kernel read: part of the step that was timed
                return self.model.logits(hidden, self.fused.kind), {}
        hidden = self._forward(inputs)
        scores = {i: self._score(hidden, chunks, i, top_k) for i, top_k in scored.items()}
        if not all_positions:
            hidden = hidden[inputs.last_index]
        return self.model.logits(hidden), scores

    def _score(self, hidden: torch.Tensor, chunks: list[SeqChunk], index: int, top_k: int) -> ScoredPrompt:
        """Chunk `index`'s prompt logprobs from the step's hidden states [T, H] (its new tokens but the last)."""
        offset = sum(len(c.token_ids) - c.start for c in chunks[:index])
        chunk = chunks[index]
        rows = hidden[offset:offset + len(chunk.token_ids) - chunk.start - 1]
        return score_prompt(self.model.logits, rows, chunk.token_ids, chunk.start, top_k)

    def _fused_hidden(self, inputs: BatchInputs) -> torch.Tensor | None:
        """The decode step's hidden states from the fused decode layers, or None after recording their fallback."""
        assert self.fused is not None
        try:
            return self.fused.hidden(inputs.input_ids, inputs.positions, inputs.meta)
        except StrictFallbackError:
            raise
        except Exception as exc:
            self.recorder.record("op", "decode layers", wanted="fused host kernel", instead="the model's modules",
                                 why=exception_line(exc))
            self.fused = None  # the modules rewrite the same K/V into the same slots
            return None

    def _forward(self, inputs: BatchInputs) -> torch.Tensor:
        """The compiled forward for decode steps (one query per sequence: few shapes, launch-bound), the eager
        forward for prefill (many tokens, GEMM-bound), so the compiled graph does not recompile per prompt; the
        prefill's element-wise parts in host kernels where the plan kept them (prompt_layers)."""
        if self.compiled is not None and is_decode(inputs):
            try:
                with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT, fail_on_recompile_limit_hit=True):
                    return self.compiled(*decode_arguments(inputs))
            except StrictFallbackError:
                raise
            except Exception as exc:
                self.recorder.record("path", "model forward", wanted=f"torch.compile({self.plan.compiled.value})",
                                     instead="eager", why=exception_line(exc))
                self.compiled = None
        if self.prompt is not None and not is_decode(inputs):
            try:
                return self.prompt.hidden(inputs.input_ids, inputs.positions, inputs.meta)
            except HostKernelInputError as exc:  # refused before a kernel read past a table: the modules rewrite
                # the same K/V into the same slots
                self.recorder.record("op", "prompt layers", wanted="element-wise parts in host kernels",
                                     instead="the model's modules", why=exception_line(exc))
                self.prompt = None
        return self.model(inputs.input_ids, inputs.positions, inputs.meta)

    def warm_up(self) -> None:
        """Run a prefill and a decode on the first block so fallbacks surface before any request."""
        tokens = [0] * 3
        self.run_chunks([SeqChunk(tokens[:2], 0, [0])])
        self.run_chunks([SeqChunk(tokens[:3], 2, [0])])

    def warm_up_decode_shapes(self) -> None:
        """Let a compiled forward meet the decode shapes it will see, so it compiles at start-up, not on a request:
        one sequence, and several with equal and with ragged contexts (no mask, a mask), below and above the
        step size where the weight layout switches kinds."""
        if self.compiled is None:
            return
        tokens = [0] * 8
        layout = self.model.layout
        sizes = [2] + ([layout.switch_tokens + 1] if len(layout.kinds) > 1 else [])
        for size in (n for n in sizes if n <= self.plan.kv_blocks.value):  # one block per sequence
            for ragged in (False, True):
                lengths = [4 + (i % 3 if ragged else 0) for i in range(size)]
                self.run_chunks([SeqChunk(tokens[:n - 1], 0, [i]) for i, n in enumerate(lengths)])
                self.run_chunks([SeqChunk(tokens[:n], n - 1, [i]) for i, n in enumerate(lengths)])


def forward_groups(chunks: list[SeqChunk]) -> list[list[int]]:
    """Chunk indices split into groups that attend apart: decodes together; prompts by length, a new group whenever
    padding the group's queries and contexts to its longest would cost over PADDING_LIMIT x the attention work it
    needs, at most MAX_PROMPT_GROUPS groups."""
    new = [len(c.token_ids) - c.start for c in chunks]
    decodes = [i for i, n in enumerate(new) if n == 1]
    prompts = sorted((i for i, n in enumerate(new) if n > 1), key=lambda i: (new[i], len(chunks[i].token_ids)))
    limit = PADDING_LIMIT
    while True:
        groups: list[list[int]] = []
        for i in prompts:
            trial = [*groups[-1], i] if groups else [i]
            padded = len(trial) * max(new[j] for j in trial) * max(len(chunks[j].token_ids) for j in trial)
            if groups and padded <= limit * sum(new[j] * len(chunks[j].token_ids) for j in trial):
                groups[-1] = trial
            else:
                groups.append([i])
        if len(groups) <= MAX_PROMPT_GROUPS:
            break
        limit *= 2
    return [g for g in ([decodes] if decodes else []) + groups]


def split_sizes(chunks: list[SeqChunk], sizes: list[int]) -> list[list[SeqChunk]]:
    """`chunks` cut into consecutive groups of `sizes`."""
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [chunks[start:start + size] for start, size in zip(starts, sizes, strict=True)]


def is_decode(inputs: BatchInputs) -> bool:
    return inputs.meta.num_queries == 1 and inputs.meta.query_index is None


def decode_arguments(inputs: BatchInputs) -> tuple:
    """The forward's arguments with the batch and context dimensions marked dynamic: one compiled graph serves
    every batch size above one and every context length."""
    meta = inputs.meta
    for tensor, dims in ((inputs.input_ids, (0,)), (inputs.positions, (0,)), (meta.slot_mapping, (0,)),
                         (meta.context_slots, (0, 1)), (meta.context_lens, (0,)), (meta.mask, (1, 3)),
                         (meta.window_mask, (1, 3))):
        if tensor is not None:
            for dim in dims:
                torch._dynamo.maybe_mark_dynamic(tensor, dim)
    return inputs.input_ids, inputs.positions, meta
