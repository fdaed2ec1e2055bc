"""Storage formats of quantized linear weights: each owns its constants (formats/integer.py: the int8 / int4
blocks the host kernels read), its conversions and its module-level reference."""
