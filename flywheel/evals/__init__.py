"""Evaluations with evidence: specs, recurrence, transfer, context, exactness, manifests, replay, stats, plots."""
