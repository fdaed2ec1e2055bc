"""The host (CPU) C++ kernels of the panels and quantized kinds, built at first use (build.py) with the layout
constants their formats own passed in as compile-time defines."""
