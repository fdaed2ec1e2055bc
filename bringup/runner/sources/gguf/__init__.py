"""GGUF checkpoints (llama.cpp's single-file format): settings, tokenizer, chat template and weights read from one
file with the `gguf` package (memory-mapped), mapped onto the families and the checks a model directory gets."""
