"""Answer extraction and symbolic equivalence. Knows nothing of Ray, torch or the catalog."""
