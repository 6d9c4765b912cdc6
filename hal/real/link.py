"""The link layer of the real backends: a UDP socket that talks to the configured controller only,
the controller's sequence counter unwrapped and classified, and the link statistics."""
from __future__ import annotations

import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

from robident_twin.errors import ConfigError, RobidentError


class CommunicationLost(RobidentError):
    """The controller stopped sending (watchdog expired) or never became ready."""


@dataclass
class LinkStats:
    received: int = 0
    lost: int = 0
    late: int = 0
    duplicated: int = 0
    reordered: int = 0
    malformed: int = 0
    foreign: int = 0
    replies: int = 0
    max_gap_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class SequenceTracker:
    """Unwrap a ``bits``-bit sequence counter and classify packets as new, duplicate or
    reordered; ``lost`` counts the counters never received between the first and the newest."""

    def __init__(self, bits: int):
        self.mod = 1 << bits
        self.newest: int | None = None
        self.first: int | None = None
        self.seen: set[int] = set()

    def unwrap(self, raw: int) -> int:
        if self.newest is None:
            return int(raw)
        half = self.mod // 2
        d = (int(raw) - self.newest) % self.mod
        if d >= half:
            d -= self.mod
        return self.newest + d

    def classify(self, raw: int) -> tuple[str, int]:
        """('new' | 'duplicate' | 'reordered', unwrapped counter) and update."""
        u = self.unwrap(raw)
        if u in self.seen:
            return "duplicate", u
        self.seen.add(u)
        if self.newest is None:
            self.newest = self.first = u
            return "new", u
        if u < self.newest:
            return "reordered", u
        self.newest = u
        return "new", u

    @property
    def lost(self) -> int:
        if self.newest is None:
            return 0
        return (self.newest - self.first + 1) - len(self.seen)


class UdpEndpoint:
    """A bound UDP socket that accepts and answers the configured controller ``host:controller_port``
    only (with no port set yet nothing is accepted)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, bind_host: str = "127.0.0.1",
                 controller_port: int | None = None):
        try:
            self.host = socket.gethostbyname(host)
        except OSError as exc:
            raise ConfigError(f"backend.host: cannot resolve controller host {host!r} ({exc})") from None
        self.controller_port = controller_port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        try:
            self.sock.bind((bind_host, int(port)))
        except OSError as exc:
            self.sock.close()
            raise ConfigError(f"backend.port: cannot bind UDP {bind_host}:{port} ({exc})") from None
        self.address = self.sock.getsockname()
        self.peer: tuple[str, int] | None = None
        self.foreign = 0

    def recv(self, timeout_s: float) -> bytes | None:
        """The next datagram from the controller host, or None after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data, addr = self.sock.recvfrom(65536)
            except (socket.timeout, BlockingIOError):
                return None
            except OSError:  # e.g. ICMP port unreachable reported on the socket
                continue
            if addr[0] != self.host or self.controller_port is None or addr[1] != self.controller_port:
                self.foreign += 1
                continue
            self.peer = addr
            return data

    def send(self, data: bytes) -> None:
        if self.peer is None or self.peer[0] != self.host:
            raise CommunicationLost("no controller address to answer yet")
        self.sock.sendto(data, self.peer)

    def close(self) -> None:
        self.sock.close()
