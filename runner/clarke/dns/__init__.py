"""DNS across the link, for recorded sites (issue 33): the archive's names are looked up
through the satellite, so each lookup costs what it would.

    resolver.py   an authoritative resolver for one zone (on the gateway side), and a
                  caching forwarder (a terminal's DNS cache); both log every query
    __main__.py   `python -m clarke.dns authoritative|cache|stub ...`: one of them as a
                  process in a namespace or container, until SIGTERM

The names a resolver answers are a zone (clarke.sites.zone: data, which the agents'
contract carries too).

Queries are logged as JSON lines (time, client, name, type, answer, and for the cache
whether it was a hit), so a load's lookups are counted where they were answered."""
