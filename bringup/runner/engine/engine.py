"""The engine core: request lifecycle over the scheduler and executor (NOT thread-safe)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import torch

from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.runner.engine.block_manager import BlockManager
from bringup.runner.engine.executor import Executor
from bringup.runner.engine.options import EngineOptions
from bringup.runner.engine.outputs import PromptLogprobs, RequestError, RequestOutput
from bringup.runner.engine.prefix_key import cache_identity
from bringup.runner.engine.prompt_logprobs import ScoredPrompt
from bringup.runner.engine.reconfirm import Reconfirmation
from bringup.runner.engine.sampling import sample
from bringup.runner.engine.scheduler import Scheduler
from bringup.runner.engine.sequence import Sequence
from bringup.runner.engine.startup import start_engine
from bringup.runner.plan.graphs import off
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.sampling_params import SamplingParams

log = get_logger("runner")


class LLMEngine:
    def __init__(self, *, executor: Executor, tokenizer, plan: ExecutionPlan, fallbacks: FallbackRecorder,
                 model_name: str, eos_token_ids: list[int], model_fingerprint: str = "",
                 reconfirmation: Reconfirmation | None = None) -> None:
        self.executor, self.tokenizer, self._plan, self.fallbacks = executor, tokenizer, plan, fallbacks
        self.reconfirmation = reconfirmation  # the plan re-timed at idle when the start's timings were not clean
        self.model_name, self.eos_token_ids = model_name, set(eos_token_ids)
        self.model_fingerprint = model_fingerprint  # the model's files' sha256 (ModelSource.fingerprint)
        self.max_model_len: int = plan.max_model_len.value
        self.vocab_size = executor.model.config.vocab_size
        self.blocks = BlockManager(plan.kv_blocks.value, plan.block_size, caching=plan.prefix_caching.value,
                                   identity=cache_identity(model_fingerprint, plan))
        self.scheduler = Scheduler(self.blocks, plan.max_num_seqs.value, plan.max_num_batched_tokens.value,
                                   plan.prefill_chunk.value)
        self._seqs: dict[str, Sequence] = {}
        self._arrivals = 0
        self.steps_run = 0  # steps that ran the model (one that ran only prompt chunks returns no output)

    @property
    def plan(self) -> ExecutionPlan:
        """The running plan; its graphs row off, with the fault, once a replay failed while serving (every decode
        step has run eager since)."""
        graphs = self.executor.graphs
        if graphs is not None and graphs.failed is not None and self._plan.graphs.value:
            self._plan = replace(self._plan, graphs=off(f"a replay failed while serving, and every decode step runs "
                                                        f"eager since: {graphs.failed}"))
        return self._plan

    @plan.setter
    def plan(self, plan: ExecutionPlan) -> None:
        """A new plan (re-confirmed at idle): K/V cached under the old one is not found again if it computes K/V
        differently."""
        self._plan = plan
        self.blocks.use_identity(cache_identity(self.model_fingerprint, plan))

    @classmethod
    def create(cls, options: EngineOptions) -> LLMEngine:
        """Select the device, read the profile, plan, load, allocate the KV cache, warm up."""
        return start_engine(cls, options)

    # ---------------------------------------------------------------- requests
    def add_request(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams) -> None:
        self.check_request(request_id, prompt_token_ids, params)
        seed = params.seed if params.seed is not None else random.SystemRandom().randrange(2**63)
        seq = Sequence(request_id, list(prompt_token_ids), len(prompt_token_ids), params, self._arrivals,
                       generator=torch.Generator().manual_seed(seed),
                       logprobs=[] if params.logprobs is not None else None)
        self._arrivals += 1
        self._seqs[request_id] = seq
        self.scheduler.add(seq)

    def check_request(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams) -> None:
        """The ValueError add_request would raise for this request (bad input), without adding it. It reads the
        engine's fixed limits and looks the id up among the running requests, so the replica router calls it from its
        own thread while the engine steps on another."""
        params.validate()
        if request_id in self._seqs:
            raise ValueError(f"request_id: {request_id!r} is already running")
        if not prompt_token_ids:
            raise ValueError("prompt: is empty; give at least one token")
        room = 0 if params.max_tokens == 0 else 1  # a scoring request generates nothing
        if len(prompt_token_ids) + room > self.max_model_len:
            raise ValueError(f"prompt: {len(prompt_token_ids)} tokens do not fit the context of "
                             f"{self.max_model_len} tokens (max_model_len)"
                             + (" with room to generate" if room else ""))
        bad = [t for t in prompt_token_ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"prompt: token id {bad[0]} is outside the vocabulary [0, {self.vocab_size})")

    def abort_request(self, request_id: str) -> None:
        seq = self._seqs.pop(request_id, None)
        if seq is not None:
            self.scheduler.finish(seq)
            seq.finish_reason = "abort"

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def idle_work(self, interrupted: Callable[[], bool]) -> bool:
        """What the engine does while no request runs (a server's loop calls it then): the plan re-confirmed when
        the start's timings were not clean and it is due (engine/reconfirm.py). Whether it did anything;
        `interrupted` (a request waiting) stops it before its next decode step."""
        if self.reconfirmation is None or self.has_unfinished():
            return False
        timed = self.reconfirmation.idle(self, interrupted)
        if timed:
            self.blocks.drop_cache()  # its decode steps wrote into free blocks the cache still listed
        return timed

    def reconfirmation_report(self) -> dict | None:
        return None if self.reconfirmation is None else self.reconfirmation.report()

    # ---------------------------------------------------------------- stepping
    def step(self) -> list[RequestOutput]:
        if self.reconfirmation is not None:
            self.reconfirmation.busy()
        seqs = self.scheduler.schedule()
        if not seqs:
            return []
        self.steps_run += 1
        logits, scores = self._run(seqs)
        seqs, logits, scores = self._past_chunks(seqs, logits, scores)
        if not seqs:
            return []
        trusted = torch.isfinite(logits.amax(dim=-1))  # NaN anywhere, +inf anywhere or all -inf: False
        sampled = sample(logits, seqs)
        untrusted = set() if bool(trusted.all()) else set((~trusted).nonzero().flatten().tolist())
        outputs = []
        for row, (seq, (token, logprob)) in enumerate(zip(seqs, sampled)):
            score = scores.get(row)
            if score is not None and score.non_finite_at is not None:
                outputs.append(self._fail_non_finite(seq, None, f"prompt token {score.non_finite_at}"))
                continue
            if row in untrusted:
                outputs.append(self._fail_non_finite(seq, logits[row]))
                continue
            computed_before, seq.num_cached_tokens = seq.num_cached_tokens, len(seq.token_ids)
            self.blocks.cache_full_blocks(seq, computed_before)
            if score is not None:
                seq.prompt_logprobs = score.logprobs
            if seq.params.max_tokens == 0:  # a scoring request: the prompt has run, nothing is generated
                outputs.append(self._finish_scoring(seq))
                continue
            seq.token_ids.append(token)
            if seq.logprobs is not None and logprob is not None:
                seq.logprobs.append(logprob)
            self._check_finished(seq, token)
            if seq.finish_reason is not None:
                self.scheduler.finish(seq)
                self._seqs.pop(seq.request_id, None)
            outputs.append(self._output(seq, prompt_logprobs=score.logprobs if score is not None else None))
        return outputs

    def _past_chunks(self, seqs: list[Sequence], logits: torch.Tensor, scores: dict[int, ScoredPrompt]
                     ) -> tuple[list[Sequence], torch.Tensor, dict[int, ScoredPrompt]]:
        """The step's rows whose new tokens all ran, to sample from; a prompt that ran a chunk (engine/chunks.py)
        only moves on: nothing is sampled for it, so its random generator is not drawn from."""
        rows = [row for row, seq in enumerate(seqs) if seq.step_end == len(seq.token_ids)]
        if len(rows) == len(seqs):
            return seqs, logits, scores
        for seq in seqs:
            if seq.step_end < len(seq.token_ids):
                computed_before, seq.num_cached_tokens = seq.num_cached_tokens, seq.step_end
                self.blocks.cache_full_blocks(seq, computed_before)
        kept = {row: at for at, row in enumerate(rows)}
        return ([seqs[row] for row in rows], logits[rows],
                {kept[row]: score for row, score in scores.items() if row in kept})

    def _run(self, seqs: list[Sequence]) -> tuple[torch.Tensor, dict[int, ScoredPrompt]]:
        """The step's logits; the prompt logprobs of the sequences whose prompt runs now and asks for them."""
        wanted = [row for row, seq in enumerate(seqs) if seq.scores_prompt_now]
        scored = [row for row in wanted if seqs[row].num_new_tokens > 1]  # a one-token prompt has nothing to score
        logits, scores = self.executor.run_scoring(seqs, scored) if scored else (self.executor.run(seqs), {})
        return logits, {row: scores.get(row, ScoredPrompt(logprobs=[None])) for row in wanted}

    def _finish_scoring(self, seq: Sequence) -> RequestOutput:
        self.scheduler.finish(seq)
        self._seqs.pop(seq.request_id, None)
        seq.finish_reason = "length"
        return self._output(seq, prompt_logprobs=seq.prompt_logprobs)

    def _fail_non_finite(self, seq: Sequence, row: torch.Tensor | None, where: str | None = None) -> RequestOutput:
        """Finish a request whose logits (of its next token, or of a prompt token it scores) hold NaN or inf: no
        number computed from them is served."""
        what = "NaN or infinite values" if row is None else "NaN" if bool(row.isnan().any()) else "infinite values"
        where = where or f"generated token {len(seq.output_token_ids) + 1}"
        message = (f"the model produced logits with {what} at {where}; "
                   "numbers that cannot be trusted are not served: check the model's weights and dtype "
                   "(try --dtype float32) and run `bringup verify-ops` on this device")
        log.warning("request %s: %s", seq.request_id, message)
        self.scheduler.finish(seq)
        self._seqs.pop(seq.request_id, None)
        seq.finish_reason = "error"
        return self._output(seq, RequestError("non_finite_logits", message))

    def _check_finished(self, seq: Sequence, token: int) -> None:
        p = seq.params
        by_token = (not p.ignore_eos and token in self.eos_token_ids) or token in p.stop_token_ids
        at_length = len(seq.output_token_ids) >= p.max_tokens or len(seq.token_ids) >= self.max_model_len
        settled = len(seq.text)
        seq.text += self._new_text(seq, token, last=by_token or at_length)
        cut = None if by_token else _stop_string_at(seq.text, settled, p.stop)
        if by_token:
            seq.finish_reason = "stop"
        elif cut is not None:
            seq.text = seq.text[:cut]
            seq.finish_reason = "stop"
        elif at_length:
            seq.finish_reason = "length"

    def _new_text(self, seq: Sequence, token: int, last: bool) -> str:
        """The text the token settles (all that is left when it is the last one), decoded incrementally."""
        if seq.detokenizer is None:
            seq.detokenizer = self.tokenizer.detokenizer()
        text = seq.detokenizer.add(token)
        return text + seq.detokenizer.flush() if last else text

    @staticmethod
    def _output(seq: Sequence, error: RequestError | None = None,
                prompt_logprobs: PromptLogprobs | None = None) -> RequestOutput:
        return RequestOutput(
            request_id=seq.request_id, prompt_token_ids=seq.prompt_token_ids, token_ids=seq.output_token_ids,
            text=seq.text, logprobs=None if seq.logprobs is None else list(seq.logprobs),
            finished=seq.finish_reason is not None, finish_reason=seq.finish_reason, error=error,
            prompt_logprobs=prompt_logprobs,
        )

    def stats(self) -> dict:
        return {
            "kv_blocks_total": self.blocks.num_blocks,
            "kv_blocks_used": self.blocks.num_blocks - self.blocks.num_free,
            "num_waiting": len(self.scheduler.waiting),
            "num_running": len(self.scheduler.running),
            "num_preemptions": self.scheduler.num_preemptions,
            "prefix_cache_queries": self.blocks.queries,
            "prefix_cache_hits": self.blocks.hits,
            "fallbacks": {level: int(self.fallbacks.counts[level]) for level in ("op", "path", "global")},
        }

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[RequestOutput]:
        """Offline helper: run the prompts to completion; outputs in prompt order."""
        ids = [f"generate-{self._arrivals + i}" for i in range(len(prompts))]
        for request_id, prompt in zip(ids, prompts):
            self.add_request(request_id, prompt, params)
        final: dict[str, RequestOutput] = {}
        pending = set(ids)
        while pending:
            ran = self.steps_run
            outputs = self.step()
            if not outputs and self.steps_run == ran:
                raise RuntimeError(f"the scheduler made no progress with {len(pending)} request(s) pending")
            for out in outputs:
                if out.finished and out.request_id in pending:
                    final[out.request_id] = out
                    pending.discard(out.request_id)
        return [final[i] for i in ids]


def _stop_string_at(text: str, settled: int, stops: list[str]) -> int | None:
    """Where the first stop string starts in text, searching only where one could end after `settled`."""
    if not stops:
        return None
    start = max(0, settled - max(len(s) for s in stops) + 1)
    hits = [i for i in (text.find(s, start) for s in stops) if i >= 0]
    return min(hits) if hits else None
