"""Learning: the verify-then-cache loop and how verified solutions are deposited into libraries."""
