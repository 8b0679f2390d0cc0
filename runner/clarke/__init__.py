"""Clarke: browser-level web performance measurement over emulated satellite links."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("clarke")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+source"
