"""The netns substrate as a session sees it: a testbed brought up for the session (and
removed after it), or a running one attached to by id (and left running)."""

from __future__ import annotations

from pathlib import Path

from clarke.agent import auth
from clarke.agent.agents import Applied
from clarke.errors import InputError
from clarke.place import netns
from clarke.place.plan import NetnsPlan
from clarke.testbed import lifecycle
from clarke.testbed.cross import NetnsCrossEndpoints
from clarke.testbed.state import Store


class NetnsSubstrate:
    name = "netns"

    def __init__(
        self,
        testbed_id: int | None = None,
        link: str | None = None,
        server: str | None = None,
        firefox: str | None = None,
    ) -> None:
        """`testbed_id`: attach to that running testbed (`clarke testbed up`) instead of
        bringing one up; `link`, `server`: the implementations (an attached testbed must
        have these); `firefox`: the client agent's browser, for a testbed brought up here
        (an attached one keeps its own; the session checks it)."""
        self.requested_id, self.link, self.server = testbed_id, link, server
        self.firefox = firefox
        self.plan: NetnsPlan | None = None
        self.run_dir = Path()
        self.owns = False
        self.applied: list[Applied] = []
        self.store = Store()

    def start(self, profile: str) -> NetnsPlan:
        if self.requested_id is not None:
            state = self.store.read(self.requested_id)
            if state is None:
                raise InputError(
                    f"there is no testbed {self.requested_id} (clarke testbed status; "
                    f"bring one up with clarke testbed up --id {self.requested_id})"
                )
            state, plan = lifecycle.running(self.requested_id, self.store)
            asked = (("link", self.link, state.link), ("server", self.server, state.server))
            for kind, wanted, has in asked:
                if wanted is not None and wanted != has:
                    raise InputError(f"testbed {state.id} runs the {has} {kind}, not {wanted}")
        else:
            up = lifecycle.up(
                profile, None, self.link, self.server, self.store, firefox=self.firefox
            )
            state, plan, self.owns = up.state, up.plan, True
            self.applied += [up.applied] if up.applied else []
        self.plan, self.run_dir = plan, Path(state.run_dir)
        return plan

    @property
    def pages_dir(self) -> Path:
        return self.run_dir / "pages"

    @property
    def agent_token(self) -> str:
        return auth.read_token(self.run_dir / auth.TOKEN_FILE)

    def at_client(self, argv: list[str]) -> list[str]:
        assert self.plan is not None
        return netns.exec_argv(self.plan.ns("client"), argv)

    def cross_endpoints(self) -> NetnsCrossEndpoints:
        """The cross-traffic endpoints (built with every netns testbed)."""
        assert self.plan is not None
        return NetnsCrossEndpoints(self.plan, self.store, self.run_dir)

    def note_profile(self, name: str, sha256: str) -> None:
        """The state file follows every apply."""
        if self.plan is None:
            return
        with self.store.locked():
            state = self.store.read(self.plan.id)
            if state is not None:
                state.profile, state.profile_sha256 = name, sha256
                self.store.save(state)

    def close(self) -> None:
        """Tear down a testbed this session brought up; leave an attached one running."""
        if self.plan is not None and self.owns:
            lifecycle.down(self.plan.id, self.store)
        self.plan = None
