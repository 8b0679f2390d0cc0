"""JSON read at a boundary: a nested object is found, or an empty one stands in."""

from clarke.json_value import object_at


def test_an_object_is_found_by_its_keys() -> None:
    stats = {"forward": {"schedule": {"link_time_ms": 12}}}
    assert object_at(stats, "forward", "schedule") == {"link_time_ms": 12}
    assert object_at(stats) == stats


def test_a_missing_step_or_a_value_that_is_no_object_reads_as_empty() -> None:
    stats = {"forward": {"schedule": None}, "return": [1, 2], "gateway": "down"}
    assert object_at(stats, "satellite") == {}
    assert object_at(stats, "forward", "schedule") == {}
    assert object_at(stats, "return") == {}
    assert object_at(stats, "gateway", "schedule") == {}
    assert object_at(None, "forward") == {}
