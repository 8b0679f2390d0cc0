"""State files: written atomically, read back identically, bad ones named clearly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clarke.errors import ValidationFailed
from clarke.place import procs
from clarke.place.procs import Proc
from clarke.testbed import state as st
from clarke.testbed.state import Store, state_dir


def test_round_trip(tmp_path: Path) -> None:
    store = Store(tmp_path)
    s = st.TestbedState(
        id=5, profile="geo", link="satlink", server="origin", run_dir=str(tmp_path / "5")
    )
    s.namespaces += ["clk5-client", "clk5-mgmt"]
    s.processes.append(
        Proc(
            role="satellite",
            name="satlink-satellite",
            pid=1234,
            start_time=99,
            argv=["satlink", "sat"],
            log="/x.log",
        )
    )
    s.host_changes.append("net.ipv4.tcp_allowed_congestion_control: added cubic")
    store.save(s)
    assert store.ids() == [5]
    back = store.read(5)
    assert back == s
    store.remove(5)
    assert store.read(5) is None and store.ids() == []
    store.remove(5)  # twice is fine


def test_corrupt_state_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "2.json").write_text('{"id": 2, "surprise": 1}')
    with pytest.raises(ValidationFailed, match=r"2\.json"):
        Store(tmp_path).read(2)


def test_state_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLARKE_STATE_DIR", str(tmp_path))
    assert state_dir() == tmp_path
    monkeypatch.delenv("CLARKE_STATE_DIR")
    assert state_dir() == Path("/run/clarke/testbeds")


def test_start_time_tells_a_live_process_from_a_recycled_pid() -> None:
    me = procs.start_time(os.getpid())
    assert me is not None
    live = Proc(role="x", name="me", pid=os.getpid(), start_time=me, argv=[], log="")
    assert procs.alive(live)
    recycled = live.model_copy(update={"start_time": me + 1})
    assert not procs.alive(recycled)
    # stopping a "recycled" PID must not signal this process
    procs.stop([recycled], timeout=0.1)
    assert procs.alive(live)
    assert procs.cpu_ticks(os.getpid()) is not None


def test_owner_tag_names_the_state_dir(tmp_path: Path) -> None:
    a, b = Store(tmp_path / "a"), Store(tmp_path / "b")
    assert a.owner == f"clarke:{(tmp_path / 'a').resolve()}"
    assert a.owner != b.owner
    assert len(a.owner) < 256  # IFALIASZ: it is stored as an interface alias


def test_an_older_state_file_is_still_read(tmp_path: Path) -> None:
    """Written before `link` and `server` (its `backend` named the link): `down` must
    still find what it recorded."""
    store = Store(tmp_path)
    old = {"id": 3, "profile": "lan", "backend": "satlink", "run_dir": str(tmp_path / "3")}
    store.path(3).write_text(json.dumps(old))
    s = store.read(3)
    assert s is not None and (s.link, s.server, s.profile) == ("satlink", "origin", "lan")


def test_state_and_run_dirs_let_others_pass_but_neither_list_nor_write(tmp_path: Path) -> None:
    """OpenLiteSpeed's workers (nobody) read the pages below a run dir: the state dir and
    run dirs are 0711. With 0700 every OpenLiteSpeed testbed failed at start-up ("closed
    to other users"); the token in a run dir stays 0600 on its own."""
    store = Store(tmp_path / "testbeds")
    store.save(st.TestbedState(id=3, profile="geo", link="satlink", server="origin", run_dir="x"))
    run_dir = store.make_run_dir(3)
    for d in (store.root, run_dir):
        assert d.stat().st_mode & 0o777 == 0o711, oct(d.stat().st_mode)
