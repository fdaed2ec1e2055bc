"""The plan's `quantization` row: the requested scheme (scheme.py), a checkpoint's held blocks
(held_blocks.py), a pre-quantized checkpoint's own scheme (checkpoint.py)."""
