"""Profile queues (clarke.queues): the forms a profile may write, the errors a bad one
gets, what satlink is handed, which links refuse a discipline, and the per-load queue
figures the record carries."""

from __future__ import annotations

from pathlib import Path

import pytest

from clarke import profiles
from clarke.errors import ValidationFailed
from clarke.link import netem
from clarke.link.opensand import mapping as opensand
from clarke.results.station_records import LinkRoleStats
from clarke.run.session.timeline import queue_metrics
from helpers import link_stats

GEO = Path("profiles/geo.yaml").read_text()
GEO_QUEUE = "queue: {bytes: 662500}"


def _geo_with(tmp_path: Path, queue: str) -> Path:
    assert GEO_QUEUE in GEO
    f = tmp_path / "q.yaml"
    f.write_text(GEO.replace(GEO_QUEUE, queue))
    return f


def test_the_old_forms_still_give_the_drop_tail_config_they_always_gave() -> None:
    forward = profiles.read("geo").to_satlink_config()["forward"]
    assert forward["queue"] == {"bytes": 662500} and "discipline" not in forward


def test_no_queue_is_drop_tail_of_250_ms(tmp_path: Path) -> None:
    f = tmp_path / "q.yaml"
    f.write_text(GEO.replace(GEO_QUEUE, ""))
    forward = profiles.read(str(f)).to_satlink_config()["forward"]
    assert forward["queue"] == {"ms": 250.0} and "discipline" not in forward


@pytest.mark.parametrize(
    ("queue", "satlink_queue", "discipline"),
    [
        ("queue: {ms: 300}", {"ms": 300.0}, None),
        ("queue: {packets: 400}", {"packets": 400}, None),
        # 2 BDP = 2 x the idle RTT (530 ms) of the rate in force.
        ("queue: {bdp: 2}", {"ms": 1060.0}, None),
        ("queue: {discipline: drop_head, limit: {bytes: 9000}}", {"bytes": 9000}, "drop_head"),
        (
            "queue: {discipline: codel}",
            {"packets": 1000},
            {"codel": {"target_ms": 5.0, "interval_ms": 100.0}},
        ),
        (
            "queue: {discipline: fq_codel, target_ms: 20, interval_ms: 530}",
            {"packets": 10240},
            {"fq_codel": {"target_ms": 20.0, "interval_ms": 530.0, "flows": 1024, "quantum": 1514}},
        ),
    ],
)
def test_queue_forms_and_what_satlink_gets(
    tmp_path: Path, queue: str, satlink_queue: dict[str, float], discipline: object
) -> None:
    forward = profiles.read(str(_geo_with(tmp_path, queue))).to_satlink_config()["forward"]
    assert forward["queue"] == satlink_queue
    assert forward.get("discipline") == discipline


@pytest.mark.parametrize(
    ("queue", "message"),
    [
        ("queue: {discipline: red}", r"forward\.queue\.discipline: Input should be 'drop_tail'"),
        (
            "queue: {discipline: codel, limit: {bytes: 1, ms: 2}}",
            r"forward\.queue\.limit: give exactly one of bytes, packets, ms, bdp",
        ),
        (
            "queue: {discipline: drop_tail, target_ms: 5}",
            r"forward\.queue\.target_ms: not a parameter of drop_tail",
        ),
        (
            "queue: {discipline: codel, flows: 5}",
            r"forward\.queue\.flows: not a parameter of codel \(it takes target_ms, interval_ms\)",
        ),
        (
            "queue: {discipline: fq_codel, target_ms: 200}",
            r"forward\.queue\.target_ms: must not exceed interval_ms",
        ),
        ("queue: {discipline: fq_codel, quantum: 10}", r"forward\.queue\.quantum"),
        (
            "queue: {discipline: fq_codel, tarrget_ms: 5}",
            r"forward\.queue\.tarrget_ms: unknown field",
        ),
        ("queue: {bdp: -1}", r"forward\.queue"),
        ("queue: {frames: 3}", r"forward\.queue\.frames: unknown field"),
    ],
)
def test_bad_queues_name_file_and_field(tmp_path: Path, queue: str, message: str) -> None:
    path = _geo_with(tmp_path, queue)
    with pytest.raises(ValidationFailed, match=message) as e:
        profiles.read(str(path))
    assert str(path) in str(e.value)


def test_netem_and_opensand_refuse_what_they_cannot_emulate() -> None:
    fq = profiles.read("geo-fq-codel")
    with pytest.raises(ValidationFailed, match=r"forward\.queue\.discipline: fq_codel cannot"):
        netem.Netem().check_profile(fq)
    with pytest.raises(
        ValidationFailed, match=r"return\.queue\.discipline: fq_codel cannot be mapped"
    ):
        opensand.derive(fq)
    # A drop-tail bound in BDP is theirs to emulate.
    one_bdp = profiles.read("geo-droptail-1bdp")
    assert opensand.fifo_packets(one_bdp.forward) == opensand.fifo_packets(
        profiles.read("geo").forward
    )
    assert "limit" in netem.netem_args(one_bdp.forward)


def _stats(count: int) -> dict[str, LinkRoleStats]:
    return link_stats({
        "gateway": {
            "forward": {
                "queue_delay": {
                    "count": count,
                    "mean_ms": 3.0,
                    "p50_ms": 2.0,
                    "p99_ms": 90.0,
                    "max_ms": 120.0,
                },
                "drops": {
                    "queue_full": 0,
                    "queue_head": 0,
                    "codel": 7,
                    "fq_overflow": 1,
                    "loss": 0,
                    "oversize": 0,
                    "io_error": 0,
                    "outage": 0,
                },
            }
        },
        "terminal": {"return": {"queue_delay": {"count": 0}, "drops": {}}},
    })  # fmt: skip


def test_a_load_record_carries_queue_delay_and_drops_by_cause() -> None:
    m = queue_metrics(_stats(50))
    assert m["queue_delay_forward_p50_ms"] == 2.0 and m["queue_delay_forward_p99_ms"] == 90.0
    assert m["link_drops_forward_codel"] == 7 and m["link_drops_forward_fq_overflow"] == 1
    assert not [k for k in m if "return" in k]
    assert "queue_delay_forward_p50_ms" not in queue_metrics(_stats(0))
