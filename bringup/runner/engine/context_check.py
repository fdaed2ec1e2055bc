"""The merge of a cached context by log-sum-exp (model/context_attention.py) checked before it serves: on the model's
head shapes and dtype, its error against float64 within the start-up attention check's rule (ERROR_FACTOR x the plain
masked path's error + ERROR_SLACK); where it is not, or the check cannot run, an op fallback to the masked path."""

from __future__ import annotations

from bringup.backends.registry import backend_for
from bringup.errors import StrictFallbackError, exception_line
from bringup.log import get_logger
from bringup.runner.model.attention import AttentionDispatcher
from bringup.runner.model.context_attention import context_errors
from bringup.runner.model.decoder import DecoderModel
from bringup.runner.plan.attention_timings import ERROR_FACTOR, ERROR_SLACK

log = get_logger("runner.attention")


def check_context_attention(dispatcher: AttentionDispatcher, model: DecoderModel) -> None:
    """The dispatcher merging prompts behind a cached context where the model's device offers the kernel, its SDPA
    backend is planned and the merge passes its check; the dispatcher's context_evidence says which and why."""
    backend = backend_for(model.device)
    name, attend = backend.attention_with_lse_backend, backend.attention_with_lse()
    if name is None or attend is None:
        return
    if name not in dispatcher.names:
        dispatcher.context_evidence = f"not used: {name}'s merge is offered, but {name} is not planned"
        return
    c = model.config
    try:
        error, plain = context_errors(attend, c.num_heads, c.num_kv_heads, c.head_dim, model.dtype, model.device)
    except StrictFallbackError:
        raise
    except Exception as exc:
        dispatcher.refuse_context(name, f"its float64 check could not run: {exception_line(exc)}")
        return
    said = f"error {error:.2g} against float64, the plain masked path's {plain:.2g}"
    if not error <= ERROR_FACTOR * plain + ERROR_SLACK:
        dispatcher.refuse_context(name, f"{said}: over {ERROR_FACTOR:g} x the plain path's + {ERROR_SLACK:g}")
        return
    dispatcher.use_context(name, attend, f"{name} over the cached context and causally over the prompt, merged by "
                                         f"log-sum-exp ({said})")
    log.info("attention: prompts behind a cached context: %s", dispatcher.context_evidence)
