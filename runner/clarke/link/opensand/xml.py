"""OpenSAND 8.2's XML for the three entities, from a profile's mapping
(clarke.link.opensand.mapping). The XML is built with ElementTree from our own
description of what each entity needs:

    gw/   infrastructure.xml  topology.xml  profile.xml
    st/   infrastructure.xml  topology.xml  profile.xml
    sat/  infrastructure.xml  topology.xml              (the satellite takes no profile)
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Final

from clarke import profiles
from clarke.errors import ClarkeError
from clarke.link.opensand.mapping import (
    CLEAR_SKY_CN_DB,
    DECAP_BUFFER_LEN,
    DVB_S2,
    FILES,
    FORWARD_ROLL_OFF,
    FORWARD_WAVE_FORM,
    MAC_GW,
    MAC_ST,
    ROLES,
    TAP_IFACE,
    Entities,
    Mapping,
    derive,
    mapping_table,
)
from clarke.link.opensand.return_access import (
    DVB_RCS2,
    RETURN_FRAME_MS,
    RETURN_ROLL_OFF,
    ReturnAccess,
)
from clarke.profiles import LinkProfile

DELAY_FILE: Final = "delay.txt"  # a schedule's FileDelay entries, beside gw/profile.xml
DEFAULT_CONFIG_DIR: Final = Path("/etc/opensand")  # opensand/entrypoint.sh's default

# --- XML ---------------------------------------------------------------------------------

# A tree is written as nested (tag, children) pairs: children are a scalar (the text),
# a list of pairs (sub-elements) or None (an empty element).
Node = tuple[str, "str | int | float | bool | list[Node] | None"]


def _text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6f}"
    return str(value)


def _build(parent: ET.Element, node: Node) -> None:
    tag, content = node
    el = ET.SubElement(parent, tag)
    if isinstance(content, list):
        for child in content:
            _build(el, child)
    elif content is not None:
        el.text = _text(content)


def _document(children: list[Node]) -> ET.ElementTree[ET.Element]:
    model = ET.Element("model", version="1.0.0")
    root = ET.SubElement(model, "root")
    for child in children:
        _build(root, child)
    ET.indent(model, space="  ")
    return ET.ElementTree(model)


def _serialise(tree: ET.ElementTree[ET.Element]) -> str:
    body = ET.tostring(tree.getroot(), encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


def _items(rows: list[list[Node]]) -> list[Node]:
    return [("item", row) for row in rows]


def _infrastructure(role: str, e: Entities) -> ET.ElementTree[ET.Element]:
    # OpenSAND's schema wants every entity block, in this order; only the one that
    # entity_type names is read. The split-gateway blocks (net access / phy) are unused
    # here and carry the gateway's own values.
    gw_ifaces: list[Node] = [("tap_iface", TAP_IFACE), ("mac_address", MAC_GW)]
    interconnect: list[Node] = [
        ("interconnect_address", e.gw_emu),
        ("interconnect_remote", e.gw_emu),
    ]
    entity: list[Node] = [
        ("entity_type", {"gw": "Gateway", "st": "Terminal", "sat": "Satellite"}[role]),
        (
            "entity_sat",
            [("entity_id", e.sat_id), ("emu_address", e.sat_emu), ("isl_settings", None)],
        ),
        ("entity_gw", [("entity_id", e.gw_id), ("emu_address", e.gw_emu), *gw_ifaces]),
        (
            "entity_gw_net_acc",
            [("entity_id", e.gw_id), *gw_ifaces, ("interconnect_params", interconnect)],
        ),
        (
            "entity_gw_phy",
            [
                ("entity_id", e.gw_id),
                ("interconnect_params", interconnect),
                ("emu_address", e.gw_emu),
            ],
        ),
        (
            "entity_st",
            [
                ("entity_id", e.st_id),
                ("emu_address", e.st_emu),
                ("tap_iface", TAP_IFACE),
                ("mac_address", MAC_ST),
            ],
        ),
    ]
    logs: list[Node] = [
        (block, [("level", "warning")])
        for block in ("init", "lan_adaptation", "dvb", "physical_layer", "sat_carrier")
    ]
    logs.append(("extra_levels", None))
    return _document(
        [
            ("entity", entity),
            ("logs", logs),
            # No collector on a Clarke testbed, no probe files on local disk.
            ("storage", [("enable_local", False), ("enable_collector", False)]),
            (
                "infrastructure",
                [
                    (
                        "satellites",
                        _items([[("entity_id", e.sat_id), ("emu_address", e.sat_emu)]]),
                    ),
                    (
                        "gateways",
                        _items(
                            [
                                [
                                    ("entity_id", e.gw_id),
                                    ("emu_address", e.gw_emu),
                                    ("mac_address", MAC_GW),
                                ]
                            ]
                        ),
                    ),
                    (
                        "terminals",
                        _items(
                            [
                                [
                                    ("entity_id", e.st_id),
                                    ("emu_address", e.st_emu),
                                    ("mac_address", MAC_ST),
                                ]
                            ]
                        ),
                    ),
                    ("default_gw", e.gw_id),
                ],
            ),
        ]
    )


def _wave_forms(
    table: tuple[tuple[int, str, str, float, float], ...], burst: str | None
) -> list[Node]:
    rows: list[list[Node]] = []
    for wid, modulation, coding, efficiency, threshold in table:
        row: list[Node] = [
            ("id", wid),
            ("modulation", modulation),
            ("coding", coding),
            ("efficiency", efficiency),
            ("threshold", threshold),
        ]
        if burst is not None:
            row.append(("burst_length", burst))
        rows.append(row)
    return _items(rows)


def _topology(m: Mapping, e: Entities) -> ET.ElementTree[ET.Element]:
    spot: list[Node] = [
        (
            "assignments",
            [
                ("gateway_id", e.gw_id),
                ("sat_id_gw", e.sat_id),
                ("sat_id_st", e.sat_id),
                ("forward_regen_level", "Transparent"),
                ("return_regen_level", "Transparent"),
            ],
        ),
        ("roll_off", [("forward", FORWARD_ROLL_OFF), ("return", RETURN_ROLL_OFF)]),
        (
            "forward_band",
            _items(
                [
                    [
                        ("bandwidth", m.forward_bandwidth_khz),
                        ("type", "ACM"),
                        ("wave_form", str(FORWARD_WAVE_FORM)),
                        ("group", "Standard"),
                    ]
                ]
            ),
        ),
        (
            "return_band",
            _items(
                [
                    [
                        ("bandwidth", m.return_access.bandwidth_khz),
                        ("type", "DAMA"),
                        ("wave_form", str(m.return_access.wave_form)),
                        ("group", "Standard"),
                    ]
                ]
            ),
        ),
    ]
    return _document(
        [
            ("frequency_plan", [("spots", _items([spot]))]),
            (
                "st_assignment",
                [
                    ("defaults", [("default_gateway", e.gw_id), ("default_group", "Standard")]),
                    ("assignments", None),
                ],
            ),
            (
                "wave_forms",
                [
                    ("dvb_s2", _wave_forms(DVB_S2, None)),
                    (
                        "dvb_rcs2",
                        _wave_forms(DVB_RCS2, m.return_access.burst),
                    ),
                ],
            ),
            (
                "advanced_settings",
                [
                    (
                        "links",
                        [
                            ("forward_duration", 10.0),
                            ("forward_margin", 0.0),
                            ("return_duration", RETURN_FRAME_MS),
                            ("return_margin", 0.0),
                        ],
                    ),
                    (
                        "schedulers",
                        [
                            ("burst_length", m.return_access.burst),
                            ("crdsa_frame", 3),
                            ("crdsa_delay", 250),
                            ("pep_allocation", 1000),
                        ],
                    ),
                    (
                        "timers",
                        [
                            ("statistics", 53),
                            ("synchro", m.return_access.synchro_ms),
                            ("acm_refresh", 1000),
                        ],
                    ),
                    ("delay", [("fifo_size", 10000), ("delay_timer", 1)]),
                ],
            ),
        ]
    )


# QoS: PCP -> class -> FIFO. Everything Clarke sends is PCP 0, i.e. the BE FIFO.
_QOS_CLASSES: Final = (
    (7, "NC", "NM"),
    (6, "IC", "SIG"),
    (5, "VO", "EF"),
    (4, "VI", "AF"),
    (3, "CA", "AF"),
    (2, "EE", "AF"),
    (1, "BK", "BE"),
    (0, "BE", "BE"),
)
_FIFOS: Final = (("NM", 1000), ("EF", 3000), ("SIG", 1000), ("AF", 2000), ("BE", None))


def _fifos(be_capacity: int, access_type: str) -> list[Node]:
    return _items(
        [
            [
                ("priority", prio),
                ("name", name),
                ("capacity", be_capacity if capacity is None else capacity),
                ("access_type", access_type),
            ]
            for prio, (name, capacity) in enumerate(_FIFOS)
        ]
    )


def _delay(role: str, m: Mapping, config_dir: Path) -> Node:
    """A constant delay_value at GW and ST; with a schedule, the gateway follows its
    FileDelay file and the terminal adds none (delay_file.py says why)."""
    if m.gateway_delay_file is None:
        return ("delay", [("delay_type", "ConstantDelay"), ("delay_value", m.delay_value_ms)])
    if role != "gw":
        return ("delay", [("delay_type", "ConstantDelay"), ("delay_value", 0)])
    return (
        "delay",
        [
            ("delay_type", "FileDelay"),
            ("file_path", str(config_dir / "gw" / DELAY_FILE)),
            ("refresh_period", m.delay_refresh_ms),
            ("loop", True),
        ],
    )


def _physical_layer(role: str, m: Mapping, config_dir: Path) -> Node:
    attenuation: list[Node] = [
        ("clear_sky", CLEAR_SKY_CN_DB),
        ("attenuation_type", "Ideal"),
        ("ideal_attenuation_value", 0.0),
    ]
    return (
        "physical_layer",
        [
            _delay(role, m, config_dir),
            ("minimal_condition", [("minimal_condition_type", "ACM-Loop")]),
            ("error_insertion", [("error_insertion_type", "Gate")]),
            ("uplink_attenuation", attenuation),
            ("downlink_attenuation", attenuation),
        ],
    )


def _dama(a: ReturnAccess) -> list[Node]:
    """access/dama: with constant access the CRA alone (as measured); with capacity on
    demand RBDC and VBDC said on or off."""
    dama: list[Node] = [("cra", a.cra_kbps)]
    if a.on_demand:
        dama += [("rbdc_enabled", bool(a.rbdc_max_kbps))]
        dama += [("rbdc_max", a.rbdc_max_kbps)] if a.rbdc_max_kbps else []
        dama += [("vbdc_enabled", bool(a.vbdc_max_kbit))]
        dama += [("vbdc_max", a.vbdc_max_kbit)] if a.vbdc_max_kbit else []
    return [*dama, ("algorithm", "Legacy"), ("duration", a.msl_frames)]


def _profile(role: str, m: Mapping, config_dir: Path) -> ET.ElementTree[ET.Element]:
    network: list[Node] = [
        (
            "qos_classes",
            _items([[("pcp", p), ("name", n), ("fifo", f)] for p, n, f in _QOS_CLASSES]),
        ),
        ("virtual_connections", None),
        (
            "qos_settings",
            [
                ("lan_frame_type", "Ethernet"),
                ("sat_frame_type", "Ethernet"),
                ("default_pcp", 0),
            ],
        ),
    ]
    access: list[Node]
    extra: list[Node] = []
    if role == "gw":
        network += [
            ("gw_fifos", _fifos(m.forward_fifo_packets, "ACM")),
            ("simulation", "None"),
            ("fca", 0),
            ("dama_algorithm", "Legacy"),
        ]
        access = [("random_access", [("saloha_algo", "CRDSA")]), ("simulations", None)]
    else:
        access_type = m.return_access.fifo_access_type
        network.append(("st_fifos", _fifos(m.return_fifo_packets, access_type)))
        access = [
            (
                "settings",
                [("category", "Standard"), ("dama_enabled", True), ("scpc_enabled", False)],
            ),
            ("dama", _dama(m.return_access)),
            ("random_access", None),
            ("scpc", [("carrier_duration", 5)]),
        ]
        extra = [("access2", [("scpc", [("carrier_duration", 5)])])]
    return _document(
        [
            ("control_plane", [("disable_control_plane", False)]),
            ("network", network),
            (
                "encap",
                [
                    (
                        "gse",
                        [
                            ("max_frag_id", 8),
                            ("decap_buffer_len", DECAP_BUFFER_LEN),
                            ("compatibility_mode", True),
                        ],
                    ),
                    ("rle", [("alpdu_protection", "Sequence Number")]),
                ],
            ),
            ("access", access),
            *extra,
            _physical_layer(role, m, config_dir),
        ]
    )


def generate(
    profile: LinkProfile,
    entities: Entities,
    source: str = "link profile",
    config_dir: Path = DEFAULT_CONFIG_DIR,
) -> dict[str, str]:
    """All files for all three entities: {"gw/profile.xml": XML text, ...}; with a
    schedule also gw/delay.txt, which the gateway's profile names by its path under
    `config_dir` (where the files will be read)."""
    m = derive(profile, source)
    out: dict[str, str] = {}
    for role in ROLES:
        trees = {
            "infrastructure.xml": _infrastructure(role, entities),
            "topology.xml": _topology(m, entities),
        }
        if role != "sat":
            trees["profile.xml"] = _profile(role, m, config_dir)
        for name in FILES[role]:
            out[f"{role}/{name}"] = _serialise(trees[name])
    if m.gateway_delay_file is not None:
        out[f"gw/{DELAY_FILE}"] = m.gateway_delay_file
    return out


def write(
    profile: LinkProfile, entities: Entities, directory: Path, source: str = "link profile"
) -> list[Path]:
    """Write gw/, st/ and sat/ with their XML files (and MAPPING.md) under `directory`."""
    files = generate(profile, entities, source, directory.resolve())
    written: list[Path] = []
    for rel, text in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    table = directory / "MAPPING.md"
    table.write_text(mapping_table(profile, source), encoding="utf-8")
    written.append(table)
    return written


def main(argv: list[str] | None = None) -> int:
    """`python -m clarke.link.opensand PROFILE OUT_DIR GW_EMU ST_EMU SAT_EMU`: write the
    files (used by opensand/verify-netns.sh and the image's tests)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 5:
        print(main.__doc__, file=sys.stderr)
        return 2
    name, out, gw, st, sat = args
    try:
        profile = profiles.read(name)
        paths = write(profile, Entities(gw, st, sat), Path(out), f"link profile {name!r}")
    except ClarkeError as e:
        print(f"{e.kind}: {e}", file=sys.stderr)
        return e.exit_code
    for path in paths:
        print(path)
    return 0
