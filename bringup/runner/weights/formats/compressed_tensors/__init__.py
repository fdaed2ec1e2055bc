"""compressed-tensors checkpoints (as vLLM reads them): the config.json scheme, its ignore rules, and the reader
that loads the stored weights into the linear layers."""
