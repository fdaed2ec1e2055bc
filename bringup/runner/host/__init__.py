"""Optional CPU-only kernels, built with the host C++ compiler at first use (build.py): panels.py (a linear
kernel streaming weights on every core) and paged_decode.py (decode attention reading K/V in place). Each checks
every input before a pointer reaches C++, and the plan uses one only where it measured faster on this machine.
"""
