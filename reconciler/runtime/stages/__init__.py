"""The stages of one pass (fetch -> load -> observe -> plan -> apply -> report), each a function that
takes the previous stage's result; only the pipeline composes them."""
