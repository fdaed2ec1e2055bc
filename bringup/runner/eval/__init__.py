"""`bringup eval`: a model's perplexity over a text in sliding windows, and its divergence from a reference run."""
