"""A real Slurm cluster on this machine for the tests of `clarke submit slurm`: munged,
slurmctld and three slurmd from Debian's packages, each slurmd in its own network and
UTS namespace (its own host name and address) as three nodes of one cluster.

Everything is the test's own: the configuration, state, spool and log directories under
its tmp dir, a new munge key and socket, the namespaces (`slurmt<pid>-net` holds the
cluster's bridge, 198.19.200.0/24, and the controller; `slurmt<pid>-n<k>` are the
nodes) and so the ports; no system Slurm or munge is read or touched. Slurm's commands
are run with SLURM_CONF naming this cluster's file, from the controller's namespace
(the cluster's network, where a login node would be). The daemons are started by the
fixture and stopped by PID, every process left in the nodes' namespaces with them.

The nodes share this machine's kernel and mount namespace (they are entered with
`nsenter --net`, not `ip netns exec`), so what their jobs create under /run/netns and
the testbeds' state dir is seen by the others, as Clarke's testbed ids need."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from conftest import free_port
from processes import tree as process_tree

SUBNET = "198.19.200"  # .1 the controller (on the bridge), .11.. the nodes
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo")
# A requeued job waits this long before it starts again (AuthInfo cred_expire; 120 s by
# default), and a node that stops answering is set DOWN after SlurmdTimeout.
CRED_EXPIRE_S = 15
SLURMD_TIMEOUT_S = 10


def missing_daemons() -> list[str]:
    return [d for d in DAEMONS if shutil.which(d) is None]


@dataclass
class Node:
    name: str
    netns: str
    address: str
    proc: subprocess.Popen[bytes] | None = None


@dataclass
class Cluster:
    root: Path
    conf: Path
    netns: str  # the cluster's network and the controller's namespace
    nodes: dict[str, Node]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def login(self, argv: list[str]) -> list[str]:
        """`argv` run from the cluster's network (a login node's place)."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", "--", *argv]

    def run(self, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.login(argv), env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def node_states(self) -> dict[str, str]:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"]).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait_idle(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.node_states()
            if len(states) == len(self.nodes) and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the nodes did not all become idle: {self.node_states()}")

    def start_node(self, node: Node) -> None:
        node.proc = _spawn(
            node.netns, node.name, ["slurmd", "-D", "-N", node.name, "-f", str(self.conf)],
            self.root / "log" / f"{node.name}.out",
        )  # fmt: skip
        self.procs.append(node.proc)

    def power_off(self, name: str) -> list[int]:
        """The node dies: its slurmd and everything it runs (the job's script, `clarke
        run`, the testbed's agents, browsers and link), frozen first so that nothing
        forks away, then killed. Returns the PIDs killed."""
        roots = _netns_pids(self.nodes[name].netns)
        frozen: set[int] = set()
        while True:
            tree = process_tree(roots) - frozen
            if not tree:
                break
            for pid in tree:
                _signal(pid, signal.SIGSTOP)
            frozen |= tree
        for pid in frozen:
            _signal(pid, signal.SIGKILL)
        return sorted(frozen)


def _signal(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def _netns_pids(netns: str) -> set[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def _spawn(netns: str, hostname: str, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """`argv` in namespace `netns` with a UTS namespace and host name of its own; the
    chain nsenter -> unshare -> sh -> argv execs, so the PID is the daemon's."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                "nsenter", f"--net=/run/netns/{netns}", "--",
                "unshare", "--uts", "--",
                "sh", "-c", 'hostname "$0" && exec "$@"', hostname, *argv,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _conf(root: Path, nodes: dict[str, Node], munge_socket: Path) -> str:
    first, last = 11, 10 + len(nodes)
    return f"""# A test's own Slurm cluster (tests/slurm_cluster.py).
ClusterName=clarketest
SlurmctldHost=ctl({SUBNET}.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket},cred_expire={CRED_EXPIRE_S}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/state/slurmctld.pid
SlurmdPidFile={root}/spool/%n/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
MailProg=/bin/true
# No cgroups: the jobs' processes stay where the nodes' daemons are.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdTimeout={SLURMD_TIMEOUT_S}
SlurmctldTimeout=10
ReturnToService=2
MinJobAge=900
KillWait=30
InactiveLimit=0
SlurmdParameters=config_overrides
NodeName=n[1-{len(nodes)}] NodeAddr={SUBNET}.[{first}-{last}] CPUs=2 State=UNKNOWN
PartitionName=measure Nodes=n[1-{len(nodes)}] Default=YES MaxTime=INFINITE State=UP
"""


@contextmanager
def cluster(root: Path, count: int = 3) -> Iterator[Cluster]:
    """A running cluster of `count` nodes, all idle; stopped and removed afterwards."""
    tag = f"slurmt{os.getpid()}"
    for d in ("state", "log", "spool", "munge-key", "munge-run"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "munge-key").chmod(0o700)
    (root / "munge-run").chmod(0o755)
    key = root / "munge-key" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    socket = root / "munge-run" / "munge.socket"
    nodes = {
        f"n{k}": Node(f"n{k}", f"{tag}-n{k}", f"{SUBNET}.{10 + k}") for k in range(1, count + 1)
    }
    for node in nodes.values():
        (root / "spool" / node.name).mkdir(exist_ok=True)
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, nodes, socket))
    c = Cluster(root, conf, f"{tag}-net", nodes)
    made: list[str] = []
    try:
        made.append(c.netns)
        _ip("netns", "add", c.netns)
        _ip("-n", c.netns, "link", "set", "lo", "up")
        _ip("-n", c.netns, "link", "add", "br0", "type", "bridge")
        _ip("-n", c.netns, "addr", "add", f"{SUBNET}.1/24", "dev", "br0")
        _ip("-n", c.netns, "link", "set", "br0", "up")
        for node in nodes.values():
            made.append(node.netns)
            _ip("netns", "add", node.netns)
            _ip("-n", node.netns, "link", "set", "lo", "up")
            port = f"v-{node.name}"
            _ip("-n", c.netns, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                "netns", node.netns)  # fmt: skip
            _ip("-n", c.netns, "link", "set", port, "master", "br0", "up")
            _ip("-n", node.netns, "addr", "add", f"{node.address}/24", "dev", "eth0")
            _ip("-n", node.netns, "link", "set", "eth0", "up")
        with (root / "log" / "munged.out").open("ab") as log:
            # --force: munged wants every directory above its socket open to all users;
            # the test's tmp dirs are root's alone (0700), and only root uses it here.
            munged = subprocess.Popen(
                [
                    "munged", "--foreground", "--force", f"--socket={socket}",
                    f"--key-file={key}", f"--pid-file={root}/munge-run/munged.pid",
                    f"--log-file={root}/log/munged.log",
                    f"--seed-file={root}/munge-key/munged.seed",
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )  # fmt: skip
        c.procs.append(munged)
        deadline = time.monotonic() + 20
        while not socket.exists():
            if munged.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"munged did not start: {(root / 'log/munged.out').read_text()}")
            time.sleep(0.1)
        c.procs.append(
            _spawn(c.netns, "ctl", ["slurmctld", "-D", "-f", str(conf)], root / "log" / "ctl.out")
        )
        for node in nodes.values():
            c.start_node(node)
        c.wait_idle()
        yield c
    finally:
        _stop(c, made)


def _stop(c: Cluster, namespaces: list[str]) -> None:
    """Every daemon by PID, then whatever is left in the nodes' namespaces (a job's
    processes), then the namespaces."""
    for proc in reversed(c.procs):
        if proc.poll() is None:
            proc.terminate()
    for proc in reversed(c.procs):
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for ns in namespaces:
        for pid in process_tree(_netns_pids(ns)):
            _signal(pid, signal.SIGKILL)
    for ns in namespaces:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
