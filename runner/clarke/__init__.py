"""Clarke: browser-level web performance measurement over emulated satellite links."""

from typing import Any


def __getattr__(name: str) -> Any:
    """`clarke.__version__`, looked up on first use: importlib.metadata costs ~80 ms,
    too much for the containers' health checks, which import only the testbed plan."""
    if name != "__version__":
        raise AttributeError(f"module 'clarke' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("clarke")
    except PackageNotFoundError:  # running from a source tree without installing
        value = "0.0.0+source"
    globals()["__version__"] = value
    return value
