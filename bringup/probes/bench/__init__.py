"""`bringup bench`: a trustworthy timing harness and baseline microbenchmarks."""
