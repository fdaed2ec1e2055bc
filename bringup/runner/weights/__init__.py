"""How a linear weight is stored and applied, below the model and importing nothing else in the runner.

Reading order: kinds.py (every kind by name, and the one registry: how each is placed, turned back into [out, in],
applied, and its float64 reference), layouts.py (the plain layouts: in_out, out_in, packed, slices),
layout_linear.py (the module that holds a weight in the kinds the plan may choose), held.py and reader.py (weights a
checkpoint already holds in a kind's storage, and the reader that fills the layers), formats/ (int8 and int4
blocks, fp8, GGUF blocks re-packed, compressed-tensors checkpoints), kernels/ (the host C++ kernels of the panels
and quantized kinds, and their build).
"""
