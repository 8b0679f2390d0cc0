"""Handing a station's TCP connections to a local PEP with iptables TPROXY, in the
station's place (its namespace): a mangle PREROUTING rule in a chain of our own marks
the TCP packets towards the server's LAN and delivers them to the PEP's transparent
listener, and a policy route takes marked packets to the local stack.

    terminal   TCP arriving from the client's LAN (st-lan), to the server's LAN
    gateway    TCP arriving from anywhere but the server's LAN, to the server's LAN
               (the terminal's proxy connections, across the link)

UDP is never matched: QUIC crosses the PEP's station untouched. The station's own
outbound connections leave through OUTPUT, so the PEP never intercepts itself, and
packets for the station's own addresses are never matched (`addrtype`): nothing that
arrives can make the PEP relay to its own host. The listener may sit on loopback
(`on_ip`): then nothing but TPROXY reaches it from outside the namespace."""

from __future__ import annotations

from clarke import sh
from clarke.errors import EnvironmentProblem
from clarke.place import Place

CHAIN = "CLARKE_PEP"
SYN_COMMENT = "clarke-pep-syn"  # the rule that counts intercepted connections
MARK = "0x1c1/0xffff"  # as fwmark: ip rule's and TPROXY's
TABLE = "1011"


def _where(place: Place) -> list[str]:
    gw_lan = str(place.plan.gw_lan.prefix)
    not_local = ["-m", "addrtype", "!", "--dst-type", "LOCAL"]
    if place.role == "terminal":
        where = ["-i", place.iface("st-lan")]
    elif place.role == "gateway":
        where = ["!", "-i", place.iface("gw-lan")]
    else:
        raise EnvironmentProblem(f"a PEP runs at the terminal or the gateway, not the {place.role}")
    return [*where, "-p", "tcp", "-d", gw_lan, *not_local]


def install(place: Place, port: int, on_ip: str | None = None) -> None:
    """The interception to `port` (on `on_ip`, else the address of the interface the
    packet came in on); idempotent: a previous one is removed first."""
    remove(place)
    ipt = place.argv(["iptables", "-w", "-t", "mangle"])
    try:
        sh.run([*ipt, "-N", CHAIN])
        # Packets of connections a transparent socket here already has (a PEP's
        # spoofed outbound connection's replies, or an intercepted one's next
        # segments) go to that socket.
        sh.run([*ipt, "-A", CHAIN, "-p", "tcp", "-m", "socket", "--transparent",
                "-j", "MARK", "--set-xmark", MARK])  # fmt: skip
        sh.run([*ipt, "-A", CHAIN, "-m", "mark", "--mark", MARK, "-j", "ACCEPT"])
        # Every connection intercepted, counted by its SYN whatever the PEP: a count of
        # the kernel's own that does not depend on the PEP's (clarke.pep.pepsal).
        sh.run([*ipt, "-A", CHAIN, *_where(place), "--syn",
                "-m", "comment", "--comment", SYN_COMMENT])  # fmt: skip
        on = ["--on-ip", on_ip] if on_ip else []
        sh.run([*ipt, "-A", CHAIN, *_where(place),
                "-j", "TPROXY", *on, "--on-port", str(port), "--tproxy-mark", MARK])  # fmt: skip
        sh.run([*ipt, "-A", "PREROUTING", "-j", CHAIN])
        sh.run([*place.ip(), "rule", "add", "fwmark", MARK, "lookup", TABLE])
        sh.run([*place.ip(), "route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", TABLE])
    except Exception as e:
        remove(place)
        raise EnvironmentProblem(
            f"cannot intercept TCP at the {place.role} with iptables TPROXY ({e}); the kernel "
            "needs xt_TPROXY and policy routing (docs/peps.md)"
        ) from None


def remove(place: Place) -> None:
    """Whatever install made; a no-op when nothing is there."""
    ipt = place.argv(["iptables", "-w", "-t", "mangle"])
    for argv in (
        [*ipt, "-D", "PREROUTING", "-j", CHAIN],
        [*ipt, "-F", CHAIN],
        [*ipt, "-X", CHAIN],
        [*place.ip(), "rule", "del", "fwmark", MARK, "lookup", TABLE],
        [*place.ip(), "route", "flush", "table", TABLE],
    ):
        sh.run(argv, check=False)


def intercepted_syns(place: Place) -> int | None:
    """SYNs handed to the PEP since the last reset_counters (None: no interception)."""
    ipt = place.argv(["iptables", "-w", "-t", "mangle"])
    listing = sh.run([*ipt, "-L", CHAIN, "-v", "-x", "-n"], check=False)
    for line in listing.stdout.splitlines():
        if SYN_COMMENT in line and line.split()[0].isdigit():
            return int(line.split()[0])
    return None


def reset_counters(place: Place) -> None:
    sh.run([*place.argv(["iptables", "-w", "-t", "mangle"]), "-Z", CHAIN], check=False)


def installed(place: Place) -> bool:
    ipt = place.argv(["iptables", "-w", "-t", "mangle"])
    return sh.run([*ipt, "-C", "PREROUTING", "-j", CHAIN], check=False).returncode == 0
