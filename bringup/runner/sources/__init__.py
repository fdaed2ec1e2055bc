"""Where a served model comes from: the built-in model, a Hugging Face style directory (directory/), a GGUF file
(gguf/); model_source.py asks each the same questions, identity.py names a model by its files."""
