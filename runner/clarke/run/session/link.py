"""The link of a session's testbed as the runner measures it, through the link roles'
agents: the bytes it carried per direction, a probe for the link checks
(run/linkcheck/), and the record of a campaign's link check (meta.json)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict

from clarke import profiles
from clarke.agent.agents import Agents
from clarke.errors import ClarkeError
from clarke.json_value import object_at
from clarke.place.plan import Addresses
from clarke.results.meta import LinkCheckRecord
from clarke.roles import profile_digest
from clarke.run.linkcheck import check as linkcheck
from clarke.vocab import LINK_ROLES


class LinkMeter:
    """The link of a testbed, reached through its link roles' agents."""

    def __init__(
        self, agents: Agents, addresses: Addresses, at_client: Callable[[list[str]], list[str]]
    ) -> None:
        """`at_client`: the substrate's way to run a command where the client is."""
        self.agents, self.addresses, self.at_client = agents, addresses, at_client
        self._counting_role: dict[str, str] = {}  # direction -> the link role counting it

    def link_bytes(self, direction: str) -> linkcheck.Counted | None:
        """IP bytes the link carried in `direction` since the last reset, from the link
        agent that counts them (`bytes_onto_link`: satlink and netem count at the
        sending station, OpenSAND at the receiving station's TAP), with the time it
        counted them on its own clock where it says (`counted_at_s`); None where none
        counts."""
        known = self._counting_role.get(direction)
        for role in (known,) if known else LINK_ROLES:
            try:
                stats = self.agents[role].stats()
            except ClarkeError:
                continue
            value = object_at(stats, "bytes_onto_link").get(direction)
            if isinstance(value, int | float):
                # One agent request per sample from now on.
                self._counting_role[direction] = role
                at = stats.get("counted_at_s")
                return (int(value), float(at)) if isinstance(at, int | float) else int(value)
        return None

    def probe(self) -> linkcheck.Probe:
        agents = self.agents

        def reset() -> None:
            for role in LINK_ROLES:
                agents[role].reset_stats()

        return linkcheck.Probe(
            addresses=self.addresses,
            at_client=self.at_client,
            link_bytes=self.link_bytes,
            reset_link=reset,
            link_stats=lambda: {role: agents[role].stats() for role in LINK_ROLES},
        )

    def measure(
        self, profile_name: str, level: linkcheck.CheckLevel, label: int | str
    ) -> linkcheck.Report:
        """The link as it is now (ping, iperf3 each way) against a profile."""
        report = linkcheck.Report(label, profile_name, self.agents.implementations.get("link", ""))
        return linkcheck.check_link(self.probe(), report, profiles.read(profile_name), level)


def check_record(
    report: linkcheck.Report, profile_name: str, phase: str, where: dict[str, str]
) -> LinkCheckRecord:
    """A campaign's link check as meta.json keeps it; `where`: the link's implementation
    and the substrate."""
    prof = profiles.read(profile_name)
    ping = report.ping
    fwd, ret = report.throughput.get("forward", {}), report.throughput.get("return", {})
    return LinkCheckRecord.model_validate(
        {
            "phase": phase,
            "profile": profile_name,
            "profile_sha256": profile_digest(prof),
            "link": where["link"],
            "substrate": where["substrate"],
            "passed": report.ok,
            "time_ns": int(dt.datetime.now(dt.UTC).timestamp() * 1e9),
            "rtt_mean_ms": ping.get("mean"),
            "rtt_stdev_ms": ping.get("stdev"),
            "rtt_p50_ms": ping.get("p50"),
            "rtt_p99_ms": ping.get("p99"),
            "rtt_max_ms": ping.get("max"),
            "rtt_expected_ms": linkcheck.expected_rtt_ms(prof),
            # None: not measured (the quick check leaves an unlimited direction out).
            "forward_mbps": fwd["rate_bps"] / 1e6 if "rate_bps" in fwd else None,
            "return_mbps": ret["rate_bps"] / 1e6 if "rate_bps" in ret else None,
            "forward_expected_mbps": prof.forward.rate_mbps,
            "return_expected_mbps": prof.return_.rate_mbps,
            "rate_from": {d: t.get("rate_from") for d, t in report.throughput.items()},
            "rate_method": {d: t.get("rate_method") for d, t in report.throughput.items()},
            "checks": [asdict(c) for c in report.checks],
        }
    )
