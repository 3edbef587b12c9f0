"""The application layer: what `galahad run`, `galahad serve` and the service's learner share.

Opening the catalog, store and engine (`storage.py`), the data dir's run lock (`lock.py`), starting or
joining Ray (`cluster.py`), and the one learning job: workers, run record, the verify-then-cache loop,
drained once or continuously (`job.py`). The CLI and the service call into here; nothing here knows
about argparse, HTTP or Ray Serve, and nothing here imports `flywheel.cli` or `flywheel.service`.
"""
