"""`python -m clarke.browser.worker ENGINE`: one page load, LoadRequest JSON on stdin,
LoadResult JSON on stdout. The runner starts it inside the client's network namespace
(`ip netns exec`), so the browser sees only the testbed."""

from __future__ import annotations

import sys

from clarke.browser.load import LoadRequest, LoadResult
from clarke.errors import ClarkeError


def main() -> int:
    engine = sys.argv[1] if len(sys.argv) > 1 else "selenium"
    req = LoadRequest.model_validate_json(sys.stdin.read())
    try:
        if engine == "selenium":
            from clarke.browser import selenium_engine as module
        elif engine == "browsertime":
            from clarke.browser import browsertime_engine as module  # type: ignore[no-redef]
        else:
            raise ClarkeError(f"unknown engine {engine!r}")
        result = module.load(req)
    except ClarkeError as e:
        result = LoadResult.failed(engine, f"{e.kind}: {e}")
    sys.stdout.write(result.model_dump_json() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
