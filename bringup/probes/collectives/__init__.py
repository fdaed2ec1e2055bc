"""Collective-communication checks on torch.distributed: correctness (exact, integer-valued data) and
bandwidth (nccl-tests conventions), run by N supervised local processes or under torchrun."""
