"""`python -m clarke.link.opensand PROFILE OUT_DIR GW_EMU ST_EMU SAT_EMU`."""

from clarke.link.opensand.xml import main

raise SystemExit(main())
