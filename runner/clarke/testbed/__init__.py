"""The netns substrate: five roles (client, terminal, satellite, gateway, server) as
Linux network namespaces on one host, plus a management namespace; each role's agent
runs in its namespace (`clarke serve ROLE --testbed N`) and starts the implementation
that fills the role, exactly as in a container.

    state.py      the state file per testbed: what exists, so `down` works after a crash
    build.py      the places: namespaces, veths, bridges, addresses, routes, names
    lifecycle.py  up (places, agents, the first profile) / down / status
    substrate.py  the netns substrate as a session sees it (bring up, or attach)

The plan (names, addresses) and the process and `ip` helpers are clarke.place's."""
