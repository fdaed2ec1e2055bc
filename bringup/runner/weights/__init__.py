"""How a linear weight is stored and applied, below the model and importing nothing else in the runner.

Reading order: kinds.py (every kind by name, plain data; the int4 kinds follow INT4_GROUP_SIZES) → registry.py (the
one table of kinds: where each runs, how it is placed from [out, in], turned back, applied, and its float64
reference) → layouts.py (the plain layouts: in_out, out_in, packed, slices; the panel width) → layout_linear.py (the
module that holds a weight in the kinds the plan chose) → held.py and checkpoint_reader.py (weights a checkpoint
already holds in a kind's storage, and the reader that fills the layers) → formats/ (int8 and int4 blocks, fp8, GGUF
blocks re-packed, compressed-tensors checkpoints) → kernels/ (the host C++ kernels of the panels and quantized kinds,
built with the layout constants the Python owns).
"""
