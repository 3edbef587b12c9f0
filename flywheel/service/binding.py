"""Every socket `galahad serve` listens on stays on loopback when it serves on loopback.

Ray's processes bind the node's address (kept at 127.0.0.1 by `cluster.prepare`) and Serve's HTTP proxy
binds `--host`, but each Serve replica starts an inter-deployment gRPC server on `[::]:0`, every interface,
hard-coded in `ray.serve._private.replica.Replica._on_initialized`. Nothing here uses it, yet it listens.
`bind_replica_grpc_to(host)` rewrites that bind, in this replica's process, to `host` (127.0.0.1 on
loopback, else the node's own address), never every interface. `GalahadApi.__init__` calls it before Serve
starts that server; it wraps the one function `_on_initialized` calls by its module-global name.
"""

from __future__ import annotations

LOOPBACK = "127.0.0.1"
ANY = ("[::]:", "0.0.0.0:")


def on_host(address: str, host: str) -> str:
    """`[::]:PORT` or `0.0.0.0:PORT` as `HOST:PORT` (`[HOST]:PORT` for IPv6); any other address unchanged."""
    if not address.startswith(ANY):
        return address
    port = address.rsplit(":", 1)[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_replica_grpc_to(host: str) -> bool:
    """Make this process's Serve replica bind its inter-deployment gRPC server to `host` instead of every
    interface; False when this Ray has no such hook (the listening-socket test then names the socket)."""
    from ray.serve._private import replica as serve_replica

    bind = getattr(serve_replica, "add_port_to_grpc_server", None)
    if bind is None:
        return False
    bind = getattr(bind, "galahad_original", bind)

    def add_port_on_host(server, address: str):
        return bind(server, on_host(address, host))

    add_port_on_host.galahad_original = bind
    serve_replica.add_port_to_grpc_server = add_port_on_host
    return True
