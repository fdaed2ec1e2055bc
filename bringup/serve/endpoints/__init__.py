"""The endpoints that touch the model: completions, chat completions, tokenize and detokenize."""
