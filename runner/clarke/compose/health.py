"""`python -m clarke.compose.health ROLE`: a container HEALTHCHECK. Exit 0 when the
role's agent answers /health on its mgmt address. Imports only the standard library and
the plan, so that checking every few seconds costs next to nothing on a machine that is
measuring."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

from clarke.place.plan import ROLES, compose_plan


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ROLES:
        print(f"usage: python -m clarke.compose.health {{{'|'.join(ROLES)}}}", file=sys.stderr)
        return 2
    url = f"{compose_plan().agent_url(argv[0])}/health"
    try:
        with urllib.request.urlopen(url, timeout=4) as resp:
            return 0 if resp.status == 200 else 1
    except (urllib.error.URLError, OSError) as e:
        print(f"{url}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
