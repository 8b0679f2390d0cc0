"""Generated test pages: page models (a registry read from YAML), exact-size JPEG objects,
the page layout, and the builder that writes pages and their manifest."""
