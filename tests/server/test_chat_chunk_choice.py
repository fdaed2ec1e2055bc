"""A streamed chat chunk's choice is built as a plain dict once per token; it must be what the schema dumps."""

import pytest

from bringup.serve.endpoints.chat import chunk_choice
from bringup.serve.requests.schemas import ChatChoiceLogprobs, ChatChunkChoice, ChatDelta, ChatTokenLogprob


def schema_dump(choice: ChatChunkChoice) -> dict:
    return {**choice.model_dump(exclude={"delta"}), "delta": choice.delta.model_dump(exclude_none=True)}


@pytest.mark.parametrize("delta, logprobs, finish_reason", [
    (ChatDelta(role="assistant", content=""), None, None),
    (ChatDelta(content="Hello"), None, None),
    (ChatDelta(), None, "length"),
    (ChatDelta(content=" world"), ChatChoiceLogprobs(content=[ChatTokenLogprob(token=" world", logprob=-0.5,
                                                                              bytes=[32, 119], top_logprobs=[])]),
     "stop"),
])
def test_the_plain_dict_is_the_schemas_dump_key_for_key_in_order(delta, logprobs, finish_reason):
    model = ChatChunkChoice(index=1, delta=delta, logprobs=logprobs, finish_reason=finish_reason)
    built = chunk_choice(1, delta.model_dump(exclude_none=True), logprobs.model_dump() if logprobs else None,
                         finish_reason)
    assert built == schema_dump(model) and list(built) == list(schema_dump(model))
