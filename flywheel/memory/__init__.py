"""Memory: libraries, the retrieval policy, the one graft -> decode path, and answering."""
