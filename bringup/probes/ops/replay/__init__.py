"""verify-ops: eager against graph replay (capture, replay with new static inputs, bisect)."""
