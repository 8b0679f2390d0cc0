"""Recorded sites: the site archive and what reads, writes, imports and builds it.

    archive.py    the archive format (site.json and bodies/ by SHA-256), read and checked
    store.py      writing an archive: bodies stored by content, origins gathered
    headers.py    what of a recorded response's headers an archive keeps
    har.py        importing a HAR 1.2 file with content (Firefox, Chromium, Browsertime,
                  mitmproxy exports)
    warc.py       importing a WARC file (warcio)
    composition.py  what an archive holds, in the Web Almanac's terms (requests and
                  bytes per content type, origins, third parties)
    placement.py  the archive's origins on the server's LAN: an address per recorded one
    zone.py       the names a resolver answers (name -> IPv4 address, TTL), read from
                  a JSON file or carried in a request to an agent
    generate/     a seeded generator of multi-origin sites that follow published
                  page-composition statistics (pages/composition/)

docs/sites.md describes the format and the commands."""
