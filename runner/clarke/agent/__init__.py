"""Role agents: a small HTTP service per role on the management network.

    GET  /health         role, implementation, versions, readiness
    POST /config         apply a role's settings (link profile, congestion control …)
    GET  /stats          the implementation's counters (link, per-connection server stats)
    POST /stats/reset    start counting afresh (before each page load)
    POST /load           client role only: load one page (LoadRequest -> LoadResult)

The same code runs in a network namespace (netns substrate) or a container (compose),
so the runner has one code path for both."""
