"""Model runtime (loading, fingerprints, deterministic configuration, prefill/decode, graft) and Ray actors."""
