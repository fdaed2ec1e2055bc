"""The report's sections as plain data: identity, capabilities, the op matrix, compiled, bench, roofline, plan, runs."""
