"""Role agents: a small HTTP service per role on the management network, in the role's
place, serving the implementation that fills the role (clarke.roles).

    GET  /health         role, implementation, versions, readiness
    GET  /state          what is in force (a link's profile and its hash, a server's cc)
    POST /config         apply a role's settings; a no-op when they are in force
    GET  /stats          the implementation's counters (link, per-connection server stats)
    POST /stats/reset    start counting afresh (before each page load)
    POST /load           client role only: load one page (LoadRequest -> LoadResult)

    serve.py    `clarke serve ROLE`: the role's process, on both substrates
    server.py   the HTTP side of an agent: a request read within its limits, the token
    routes.py   an agent's routes, a table: what each takes and answers, and its handler
    client.py   the runner's side of one agent
    agents.py   the runner's side of a testbed's agents: ensure a profile, a congestion
                control, read back what is in force
"""
