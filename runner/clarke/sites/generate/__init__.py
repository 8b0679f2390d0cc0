"""Generated multi-origin sites that follow published page-composition statistics.

    statistics.py  the statistics a site follows (pages/composition/*.yaml): each figure
                   with its source, published by the Web Almanac or Clarke's assumption
    plan.py        a seeded plan of the page: every request's type, size, origin and
                   what asks for it (the document, a stylesheet or a script)
    content.py     real bodies of an exact transferred size: HTML, CSS, JavaScript,
                   JSON (gzip-coded), JPEG images, TrueType fonts
    build.py       the page's documents written as a clarke-site archive, and the
                   composition it has beside the figures it follows

docs/sites.md ("Generated sites") describes what a generated site holds."""
