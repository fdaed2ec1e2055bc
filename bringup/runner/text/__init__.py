"""Text in and out of the model: tokenizers, incremental detokenisation, chat templates and their limits."""
