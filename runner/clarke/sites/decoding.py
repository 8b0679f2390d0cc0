"""Taking a recorded body's content coding off as a stream, never more than a limit.

A recording's body may be a decompression bomb: 10 MB of gzip that holds 10 GiB of
zeros, or far less of brotli. Each decoder here turns compressed chunks into pieces of
at most PIECE bytes (zlib's `max_length`, brotli's `output_buffer_limit`), so memory
stays bounded whatever the ratio, and `decode` stops with `DecodeError` as soon as the
output passes the caller's limit, long before the bomb is spent. A body that does not
decode in the coding it is labelled with, or that ends before its coding does (a file
cut short), is an error too: never stored as if it were the body."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Protocol

import brotli

PIECE = 1 << 20
GZIP_CODINGS = frozenset({"gzip", "x-gzip"})
DEFLATE = "deflate"
BROTLI = "br"
GZIP_MAGIC = b"\x1f\x8b"
CODINGS = (*sorted(GZIP_CODINGS), DEFLATE, BROTLI)


class DecodeError(Exception):
    """The body does not decode, or ends before its coding does."""


class TooLarge(DecodeError):
    """The body decodes to more than the limit."""


class _Decoder(Protocol):
    def feed(self, data: bytes) -> Iterator[bytes]: ...
    def finished(self) -> bool: ...


class _Zlib:
    """gzip (concatenated members too, as RFC 1952 allows) or deflate (zlib-wrapped, or
    raw as some servers send it: browsers take both). Bytes after the end that do not
    start another gzip member (padding some servers add) are left, as browsers leave
    them."""

    def __init__(self, coding: str) -> None:
        self.gzip = coding in GZIP_CODINGS
        self.d: zlib._Decompress | None = None
        self.trailing = False

    def _new(self, first: bytes) -> zlib._Decompress:
        if self.gzip:
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        wrapped = len(first) >= 2 and first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0
        return zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data and not self.trailing:
            if self.d is not None and self.d.eof:
                if not (self.gzip and data.startswith(GZIP_MAGIC)):
                    self.trailing = True
                    return
                self.d = None
            if self.d is None:
                self.d = self._new(data)
            try:
                yield self.d.decompress(data, PIECE)
                while self.d.unconsumed_tail and not self.d.eof:
                    yield self.d.decompress(self.d.unconsumed_tail, PIECE)
            except zlib.error as e:
                raise DecodeError(str(e)) from None
            data = self.d.unused_data if self.d.eof else b""

    def finished(self) -> bool:
        return self.d is not None and self.d.eof


class _Brotli:
    def __init__(self) -> None:
        self.d = brotli.Decompressor()

    def feed(self, data: bytes) -> Iterator[bytes]:
        try:
            yield self.d.process(data, output_buffer_limit=PIECE)
            while not self.d.can_accept_more_data():
                yield self.d.process(b"", output_buffer_limit=PIECE)
        except brotli.error as e:
            raise DecodeError(str(e) or "not valid brotli") from None

    def finished(self) -> bool:
        return bool(self.d.is_finished())


def _decoder(coding: str) -> _Decoder:
    if coding in GZIP_CODINGS or coding == DEFLATE:
        return _Zlib(coding)
    if coding == BROTLI:
        return _Brotli()
    raise DecodeError(f"content coding {coding} is not one Clarke decodes ({', '.join(CODINGS)})")


def supported(coding: str) -> bool:
    return coding in CODINGS


def decode(chunks: Iterable[bytes], coding: str | None, limit: int) -> Iterator[bytes]:
    """The body of `chunks` with content coding `coding` taken off (None: as it is), in
    pieces; DecodeError once it passes `limit` bytes, where it does not decode, or where
    it ends before its coding does."""
    total = 0

    def counted(piece: bytes) -> bytes:
        nonlocal total
        total += len(piece)
        if total > limit:
            raise TooLarge(f"decodes to more than {limit} bytes")
        return piece

    if coding is None:
        for chunk in chunks:
            yield counted(chunk)
        return
    decoder = _decoder(coding)
    fed = False
    for chunk in chunks:
        fed = fed or bool(chunk)
        for piece in decoder.feed(chunk):
            if piece:
                yield counted(piece)
    if fed and not decoder.finished():
        raise DecodeError(f"the {coding} stream ends before its end (cut short?)")
