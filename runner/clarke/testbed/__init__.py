"""The netns testbed: five roles (client, terminal, satellite, gateway, server) as Linux
network namespaces on one host, plus a management namespace.

    plan.py      names and addresses of everything (the one place; compose and analysis
                 import it too)
    state.py     the state file per testbed: what exists, so `down` works after a crash
    netns.py     namespaces, veths, addresses, routes, sysctls (through clarke.sh)
    procs.py     role processes: start in a namespace, wait until ready, stop by PID
    backends.py  link emulation: satlink (default), netem, opensand (OpenSAND 8.2)
    lifecycle.py up / down / status
    verify.py    measured RTT, rate and loss against the profile
    bench.py     `clarke bench link`
"""
