"""Every socket `galahad serve` listens on stays on loopback when it serves on loopback.

What Ray 2.60 starts, seen with `ss -ltnp` while `galahad serve --host 127.0.0.1` runs on a local cluster:
the GCS, the raylet, the dashboard agent, the runtime-env agent, the autoscaler monitor and every core
worker bind the node's address, which `cluster.prepare` keeps at 127.0.0.1
(`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`); Serve's HTTP proxy binds `http_options.host` (our `--host`); Serve's
gRPC proxy is not started (no `grpc_options` servicers). One socket did not follow: each Serve replica
starts an inter-deployment gRPC server on `[::]:0`, every interface, hard-coded in
`ray.serve._private.replica.Replica._on_initialized` with no option or env to change it. Nothing here
uses it (with `RAY_SERVE_USE_GRPC_BY_DEFAULT` off, its default, the proxy and handles reach replicas by Ray
actor calls), but it listens, behind Ray's token interceptor.

`keep_replica_grpc_on_loopback()` rewrites that bind to 127.0.0.1 in this replica's process. It must run
in the replica before Serve starts that server: `GalahadApi.__init__` calls it (Serve runs `__init__`, then
`_on_initialized`). It wraps the one function `_on_initialized` calls by its module-global name.
"""

from __future__ import annotations

LOOPBACK = "127.0.0.1"
ANY = ("[::]:", "0.0.0.0:")


def loopback_address(address: str) -> str:
    """`[::]:PORT` or `0.0.0.0:PORT` as `127.0.0.1:PORT`; any other address unchanged."""
    if address.startswith(ANY):
        return f"{LOOPBACK}:{address.rsplit(':', 1)[1]}"
    return address


def keep_replica_grpc_on_loopback() -> bool:
    """Make this process's Serve replica bind its inter-deployment gRPC server to 127.0.0.1; False when this
    Ray has no such hook (then the listening-socket test says which socket escaped)."""
    from ray.serve._private import replica as serve_replica

    bind = getattr(serve_replica, "add_port_to_grpc_server", None)
    if bind is None:
        return False
    if getattr(bind, "galahad_loopback", False):
        return True

    def add_port_on_loopback(server, address: str):
        return bind(server, loopback_address(address))

    add_port_on_loopback.galahad_loopback = True
    serve_replica.add_port_to_grpc_server = add_port_on_loopback
    return True
