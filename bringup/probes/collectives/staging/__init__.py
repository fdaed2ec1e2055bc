"""gloo with the buffers staged through the host, for device types without a collective library of their own."""
