"""`--quantization auto` on the served model: candidates measured against the plain plan (measure.py), and a
GGUF file's held blocks as candidates (held_candidates.py)."""
