"""Optional CPU-only kernels, built with the host C++ compiler at first use (build.py): panels.py (a linear
kernel streaming weights on every core), paged_decode.py (decode attention reading K/V in place) and
decode_layers.py (every decoder layer of a decode step in one call, float32 or bfloat16) and prompt_layers.py (a
prompt step's element-wise parts between the modules' products). Each checks every input before a pointer reaches
C++; the plan (plan/host_kernels.py, engine/startup/prompt.py) uses one only where it matched the plain path and
measured faster on this machine.
"""
