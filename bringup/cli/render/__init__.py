"""Tables and summaries the commands print: more than a few lines of rendering each."""
