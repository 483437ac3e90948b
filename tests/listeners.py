"""The TCP sockets that processes listen on, read from /proc (no psutil, no ss)."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path


def _address(hex_ip: str) -> str:
    raw = bytes.fromhex(hex_ip)
    # /proc/net/tcp{,6} holds the address as 32-bit words in host byte order
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, words))
    return str(ip.ipv4_mapped or ip) if ip.version == 6 else str(ip)


def tcp_listeners(pids: set[int]) -> list[tuple[int, str, int]]:
    """``(pid, address, port)`` of every listening TCP socket held by one of ``pids``."""
    sockets = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                ip, port = fields[1].split(":")
                sockets[fields[9]] = (_address(ip), int(port, 16))
    found = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in sockets:
                found.append((pid, *sockets[target[8:-1]]))
    return found
