"""OpenLiteSpeed's configuration for the testbed's server role (docs/openlitespeed.md).

`render(site, settings)` returns the two files OpenLiteSpeed reads, as
{path relative to the server root: text}:

    conf/httpd_config.conf              the server: logs, tuning (compression off,
                                        QUIC and its congestion control), the SSL
                                        listener, the virtual host's registration
    conf/vhosts/clarke/vhconf.conf      the virtual host: the pages directory as one
                                        static context with no-reuse cache headers

`write(server_root, site, settings)` writes them. Nothing else here does I/O. The site
(`OlsSite`) is here; the settings, the congestion controls the runner changes between
runs, are settings.py's.

Every key written is one OpenLiteSpeed documents: DOCUMENTED_KEYS names, for each key
(by file and block), the page of OpenLiteSpeed's manual (dist/docs of the release, 1.8)
and the anchor that documents it, and the values Clarke allows there. Key names were
confirmed against the release's configuration parser and its WebAdmin's table of
settings, which maps each key to the same help anchor. The tests parse the generated
files and check every key and value against that table.

Facts read in OpenLiteSpeed 1.8.5's source, then checked against 1.9.1 running with
this configuration (docs/openlitespeed.md says what was observed):
- quicCongestionCtrl is handed to lsquic as es_cc_algo: 1 Cubic, 2 BBRv1; 0 and the
  default mean lsquic's default, which is 3, "adaptive" (BBRv1 until the RTT is known,
  then Cubic below 1.5 ms, BBRv1 above). lsquic has no NewReno.
- enableSpdy is a bit set (1 SPDY/2, 2 SPDY/3, 4 HTTP/2, 8 HTTP/3; default 12). In 1.8
  it indexes the ALPN list directly; from 1.9 a value above 4 is shifted right by two
  bits before use, so 4 alone (HTTP/2 only) leaves no ALPN at all there. 12 offers h2
  (and http/1.1) on TCP and h3 on QUIC in both.
- The access log's %H is always HTTP/1.1 (requests are HTTP/1.1 inside the server);
  %r's version is rewritten to HTTP/2, but 1.9.1 leaves HTTP/3 requests as HTTP/1.1
  (observed): the role tells them apart by their client socket (UDP).
- A virtual host without an accessLog block logs nothing; `useServer 1` sends its
  requests to the server's access log. Access logs are flushed once a second.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from clarke.errors import InputError
from clarke.server.openlitespeed.settings import OlsSettings
from clarke.tls import DEFAULT_HOST  # www.clarke.test

OLS_VERSION: Final = "1.8.5"  # the release the keys below were checked against
VHOST: Final = "clarke"
HTTPD_CONFIG: Final = "conf/httpd_config.conf"
VHCONF: Final = f"conf/vhosts/{VHOST}/vhconf.conf"
FILES: Final = {HTTPD_CONFIG: "httpd_config.conf", VHCONF: "vhconf.conf"}

ENABLE_SPDY: Final = 12  # HTTP/2 (4) + HTTP/3 (8): h2 and http/1.1 on TCP, h3 on QUIC
SSL_PROTOCOL: Final = 24  # TLS 1.2 (8) + TLS 1.3 (16)
# errorlog's debugLevel with logLevel DEBUG. OpenLiteSpeed turns lsquic's debug log on
# (its lines name each connection's congestion controller) when its log level, 7000 +
# 10 x debugLevel, reaches DBG_HIGH (7080): 8 or more (read in the 1.9.1 source). 10 is
# the level of OpenLiteSpeed's own debug toggle, and the one observed to work.
DEBUG_LEVEL: Final = 10

# One access-log line per request (ServLog_Help: Apache-style custom log format; the
# directives below are the ones OpenLiteSpeed's access log implements):
#   %{msec}t    request time, ms since the epoch
#   %a %{remote}p   client address and port (for HTTP/3 the client's UDP port)
#   "%r"        request line; its version is HTTP/1.1, HTTP/2 or HTTP/3
#   %>s %b      status, response body bytes sent
#   %O %D       bytes sent including headers, time taken in microseconds
LOG_FORMAT: Final = '%{msec}t %a %{remote}p "%r" %>s %b %O %D'

NO_REUSE_HEADERS: Final = (
    'set Cache-Control "no-store, no-cache, must-revalidate, max-age=0"',
    "set Pragma no-cache",
    "set Expires 0",
    "unset ETag",
)

DEFAULT_SERVER_ROOT: Final = Path("/usr/local/lsws")


# --- what is documented -------------------------------------------------------------------


@dataclass(frozen=True)
class Documented:
    """Where OpenLiteSpeed's manual documents a key, and the values Clarke allows."""

    page: str  # dist/docs/<page>.html
    anchor: str  # the help item's id on that page
    allowed: str  # a regular expression the whole value must match
    meaning: str = ""

    def allows(self, value: str) -> bool:
        return re.fullmatch(self.allowed, value) is not None  # "." stops at a newline

    @property
    def where(self) -> str:
        if self.page.startswith("src/"):  # read in the source: the manual has no entry
            return f"{self.page} ({self.anchor})"
        return f"{self.page}.html#{self.anchor}"


_PATH = r"/[^\s{}#]*"
_BOOL = "[01]"
_NAME = "[A-Za-z0-9_-]+"
_HEADER_OP = r"(?:set|append|merge|add) [A-Za-z0-9-]+ \S.*|unset [A-Za-z0-9-]+"
_HEADER_OPS = rf"(?:{_HEADER_OP})(?:\n(?:{_HEADER_OP}))*"
_DOMAIN = r"[A-Za-z0-9.*-]+"
_ADDRESS = r"(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\]):\d{1,5}"

# (file, block path + key) -> where it is documented and what Clarke allows. A block's
# own entry checks its argument (e.g. the listener's name, a log's file name); a block
# the manual documents only through its keys points at the page's top.
DOCUMENTED_KEYS: Final[dict[tuple[str, str], Documented]] = {
    # -- conf/httpd_config.conf: server general ------------------------------------
    ("httpd_config.conf", "user"): Documented(
        "ServGeneral_Help", "runningAs", _NAME, "user the workers run as"
    ),
    ("httpd_config.conf", "group"): Documented(
        "ServGeneral_Help", "runningAs", _NAME, "group the workers run as"
    ),
    ("httpd_config.conf", "httpdWorkers"): Documented(
        "ServGeneral_Help", "httpdWorkers", "1", "one worker: one QUIC engine, one log writer"
    ),
    ("httpd_config.conf", "mime"): Documented(
        "ServGeneral_Help", "mime", r"conf/mime\.properties", "content types by extension"
    ),
    # A server key the manual does not document, read in the 1.9.1 source
    # (HttpServerImpl): without the WebAdmin console's files under admin/ a server
    # refuses to start unless disableWebAdmin is 1. (autoDetectCdn, read there too, is
    # not written: 1.9.1's configuration parser does not know it, logs "Not support"
    # and the default applies; the role keeps the download it would stop from
    # happening, docs/openlitespeed.md.)
    ("httpd_config.conf", "disableWebAdmin"): Documented(
        "src/main/httpserver.cpp", "disableWebAdmin", "1", "no WebAdmin listener"
    ),
    ("httpd_config.conf", "statDir"): Documented(
        "ServGeneral_Help", "statDir", _PATH, "real-time report files: this server's own"
    ),
    # -- server log and access log ------------------------------------------------------
    ("httpd_config.conf", "errorlog"): Documented("ServLog_Help", "log_fileName", _PATH),
    ("httpd_config.conf", "errorlog.logLevel"): Documented(
        "ServLog_Help", "log_logLevel", "DEBUG", "needed for debugLevel"
    ),
    ("httpd_config.conf", "errorlog.debugLevel"): Documented(
        "ServLog_Help", "log_debugLevel", str(DEBUG_LEVEL), "lsquic's debug log: cc measured"
    ),
    ("httpd_config.conf", "errorlog.rollingSize"): Documented(
        "ServLog_Help", "log_rollingSize", "0", "no rotation"
    ),
    ("httpd_config.conf", "errorlog.enableStderrLog"): Documented(
        "ServLog_Help", "log_enableStderrLog", _BOOL
    ),
    ("httpd_config.conf", "accessLog"): Documented("ServLog_Help", "accessLog_fileName", _PATH),
    ("httpd_config.conf", "accessLog.logFormat"): Documented(
        "ServLog_Help", "accessLog_logFormat", re.escape(LOG_FORMAT)
    ),
    ("httpd_config.conf", "accessLog.rollingSize"): Documented(
        "ServLog_Help", "log_rollingSize", "0", "no rotation: offsets stay valid"
    ),
    ("httpd_config.conf", "accessLog.keepDays"): Documented("ServLog_Help", "log_keepDays", "0"),
    ("httpd_config.conf", "accessLog.compressArchive"): Documented(
        "ServLog_Help", "log_compressArchive", "0", "rotated log archives, not responses"
    ),
    # -- tuning ---------------------------------------------------------------------
    ("httpd_config.conf", "tuning"): Documented("ServTuning_Help", "top", ""),
    ("httpd_config.conf", "tuning.fileETag"): Documented(
        "ServTuning_Help", "fileETag", "0", "no ETag on static files"
    ),
    ("httpd_config.conf", "tuning.enableGzipCompress"): Documented(
        "ServTuning_Help", "enableGzipCompress", "0", "GZIP/Brotli off, static and dynamic"
    ),
    ("httpd_config.conf", "tuning.enableDynGzipCompress"): Documented(
        "ServTuning_Help", "enableDynGzipCompress", "0"
    ),
    ("httpd_config.conf", "tuning.gzipAutoUpdateStatic"): Documented(
        "ServTuning_Help", "gzipAutoUpdateStatic", "0", "no compressed copies of files"
    ),
    ("httpd_config.conf", "tuning.brStaticCompressLevel"): Documented(
        "ServTuning_Help", "brStaticCompressLevel", "0", "0 disables Brotli globally"
    ),
    ("httpd_config.conf", "tuning.shmDefaultDir"): Documented(
        "ServTuning_Help", "shmDefaultDir", _PATH, "shared memory: this server's own"
    ),
    ("httpd_config.conf", "tuning.quicEnable"): Documented(
        "ServTuning_Help", "quicEnable", "1", "HTTP/3 server wide"
    ),
    ("httpd_config.conf", "tuning.quicShmDir"): Documented(
        "ServTuning_Help", "quicShmDir", _PATH, "QUIC's shared memory: this server's own"
    ),
    ("httpd_config.conf", "tuning.quicCongestionCtrl"): Documented(
        "ServTuning_Help", "quicCongestionCtrl", "1|2", "1 Cubic, 2 BBR; never the default"
    ),
    # -- security ---------------------------------------------------------------------
    ("httpd_config.conf", "fileAccessControl"): Documented("ServSecurity_Help", "top", ""),
    ("httpd_config.conf", "fileAccessControl.requiredPermissionMask"): Documented(
        "ServSecurity_Help", "requiredPermissionMask", "0?[0-7]{3}"
    ),
    ("httpd_config.conf", "fileAccessControl.restrictedPermissionMask"): Documented(
        "ServSecurity_Help", "restrictedPermissionMask", "0?[0-7]{3}"
    ),
    # -- the cache module, off ----------------------------------------------------------
    ("httpd_config.conf", "module"): Documented("Module_Help", "modulename", "cache"),
    ("httpd_config.conf", "module.ls_enabled"): Documented(
        "Module_Help", "moduleEnabled", "0", "no cached responses"
    ),
    # -- the virtual host's registration -----------------------------------------------
    ("httpd_config.conf", "virtualHost"): Documented("VirtualHosts_Help", "vhName", _NAME),
    ("httpd_config.conf", "virtualHost.vhRoot"): Documented(
        "VirtualHosts_Help", "vhRoot", _PATH + "/"
    ),
    ("httpd_config.conf", "virtualHost.configFile"): Documented(
        "VirtualHosts_Help", "configFile", rf"conf/vhosts/{_NAME}/vhconf\.conf"
    ),
    ("httpd_config.conf", "virtualHost.enableScript"): Documented(
        "VirtualHosts_Help", "enableScript", "0", "static files only"
    ),
    ("httpd_config.conf", "virtualHost.restrained"): Documented(
        "VirtualHosts_Help", "restrained", "1"
    ),
    # -- the listener ----------------------------------------------------------------------
    ("httpd_config.conf", "listener"): Documented("Listeners_General_Help", "listenerName", _NAME),
    ("httpd_config.conf", "listener.address"): Documented(
        "Listeners_General_Help", "listenerIP", _ADDRESS, "IP and port (listenerPort)"
    ),
    ("httpd_config.conf", "listener.secure"): Documented(
        "Listeners_General_Help", "listenerSecure", "1"
    ),
    ("httpd_config.conf", "listener.keyFile"): Documented("Listeners_SSL_Help", "keyFile", _PATH),
    ("httpd_config.conf", "listener.certFile"): Documented("Listeners_SSL_Help", "certFile", _PATH),
    ("httpd_config.conf", "listener.certChain"): Documented(
        "Listeners_SSL_Help", "certChain", "1", "server.pem holds the leaf, then the CA"
    ),
    ("httpd_config.conf", "listener.sslProtocol"): Documented(
        "Listeners_SSL_Help", "sslProtocol", str(SSL_PROTOCOL), "TLS 1.2 and 1.3"
    ),
    ("httpd_config.conf", "listener.enableSpdy"): Documented(
        "Listeners_SSL_Help", "enableSpdy", str(ENABLE_SPDY), "ALPN: HTTP/2 and HTTP/3"
    ),
    ("httpd_config.conf", "listener.enableQuic"): Documented(
        "Listeners_SSL_Help", "allowQuic", "1", "the UDP port for HTTP/3"
    ),
    ("httpd_config.conf", "listener.map"): Documented(
        "Listeners_General_Help", "virtualHostMapping", rf"{_NAME} {_DOMAIN}(?:, {_DOMAIN})*"
    ),
    # -- conf/vhosts/clarke/vhconf.conf ------------------------------------------------
    ("vhconf.conf", "docRoot"): Documented("VHGeneral_Help", "docRoot", _PATH + "/"),
    ("vhconf.conf", "enableGzip"): Documented("VHGeneral_Help", "vhEnableGzip", "0"),
    ("vhconf.conf", "enableBr"): Documented("VHGeneral_Help", "vhEnableBr", "0"),
    ("vhconf.conf", "index"): Documented("VHGeneral_Help", "indexUseServer", ""),
    ("vhconf.conf", "index.useServer"): Documented("VHGeneral_Help", "indexUseServer", "0"),
    ("vhconf.conf", "index.indexFiles"): Documented("VHGeneral_Help", "indexFiles", r"index\.html"),
    ("vhconf.conf", "index.autoIndex"): Documented("VHGeneral_Help", "autoIndex", "0"),
    ("vhconf.conf", "accessLog"): Documented("VHGeneral_Help", "aclogUseServer", ""),
    ("vhconf.conf", "accessLog.useServer"): Documented(
        "VHGeneral_Help", "aclogUseServer", "1", "into the server's access log"
    ),
    ("vhconf.conf", "expires"): Documented("VHGeneral_Help", "enableExpires", ""),
    ("vhconf.conf", "expires.enableExpires"): Documented("VHGeneral_Help", "enableExpires", "0"),
    ("vhconf.conf", "context"): Documented("Static_Context", "expuri", "/"),
    ("vhconf.conf", "context.location"): Documented("Static_Context", "location", _PATH + "/"),
    ("vhconf.conf", "context.allowBrowse"): Documented("Static_Context", "allowBrowse", "1"),
    ("vhconf.conf", "context.enableExpires"): Documented("Static_Context", "enableExpires", "0"),
    ("vhconf.conf", "context.extraHeaders"): Documented(
        "Static_Context", "extraHeaders", _HEADER_OPS, "no reuse of a response across runs"
    ),
    ("vhconf.conf", "rewrite"): Documented("Rewrite_Help", "enableRewrite", ""),
    ("vhconf.conf", "rewrite.enable"): Documented("Rewrite_Help", "enableRewrite", "0"),
}


# --- the site -----------------------------------------------------------------------------


def _check_path(field_name: str, value: Path) -> Path:
    text = str(value)
    if not value.is_absolute() or re.search(r"[\s{}#]|<<<", text):
        raise InputError(
            f"{field_name}: {text!r} must be an absolute path without spaces, braces or '#' "
            "(OpenLiteSpeed's configuration format)"
        )
    return value


@dataclass(frozen=True)
class OlsSite:
    """What is served, where, with which certificate and logs."""

    pages_dir: Path
    cert_file: Path  # PEM: the leaf, then the CA (clarke.tls)
    key_file: Path  # PEM, unencrypted
    listen_address: str
    port: int = 443
    host: str = DEFAULT_HOST
    access_log: Path = DEFAULT_SERVER_ROOT / "logs" / "clarke-access.log"
    error_log: Path = DEFAULT_SERVER_ROOT / "logs" / "clarke-error.log"
    state_dir: Path = DEFAULT_SERVER_ROOT / "tmp" / "clarke"  # shared memory, reports
    user: str = "nobody"
    group: str = "nogroup"
    extra_domains: tuple[str, ...] = ("*",)  # "*": the catch-all, e.g. requests by IP

    def __post_init__(self) -> None:
        for name in ("pages_dir", "cert_file", "key_file", "access_log", "error_log", "state_dir"):
            object.__setattr__(self, name, _check_path(name, Path(getattr(self, name))))
        try:
            ipaddress.ip_address(self.listen_address)
        except ValueError:
            raise InputError(
                f"listen_address: {self.listen_address!r} is not an IP address"
            ) from None
        if not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise InputError(f"port: {self.port!r} must be a TCP/UDP port, 1..65535")
        if not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?", self.host):
            raise InputError(f"host: {self.host!r} is not a host name")
        for domain in self.extra_domains:
            if not re.fullmatch(r"\*|[A-Za-z0-9.*-]+", domain):
                raise InputError(f"extra_domains: {domain!r} is not a domain pattern")
        for name in ("user", "group"):
            if not re.fullmatch(_NAME, getattr(self, name)):
                raise InputError(f"{name}: {getattr(self, name)!r} is not a user or group name")

    @property
    def address(self) -> str:
        """The listener's `address`: IP:port, an IPv6 address in brackets."""
        ip = ipaddress.ip_address(self.listen_address)
        return f"[{ip}]:{self.port}" if ip.version == 6 else f"{ip}:{self.port}"


# --- rendering ----------------------------------------------------------------------------

_WIDTH = 24


class _Conf:
    """OpenLiteSpeed's plain configuration: `key value` lines, `name [arg] {` ... `}`
    blocks, `key <<<END_key` ... `END_key` for a value of several lines."""

    def __init__(self, title: str) -> None:
        self.lines = [
            f"# {title}",
            "# Written by Clarke (clarke.server.openlitespeed.config) for OpenLiteSpeed "
            f"{OLS_VERSION}:",
            "# regenerated at every start and POST /config; edits here are lost.",
            "",
        ]
        self.depth = 0

    def kv(self, key: str, value: object) -> None:
        self.lines.append(f"{'  ' * self.depth}{key:<{_WIDTH}} {value}".rstrip())

    def multiline(self, key: str, values: tuple[str, ...]) -> None:
        pad = "  " * self.depth
        self.lines.append(f"{pad}{key:<{_WIDTH}} <<<END_{key}")
        self.lines.extend(f"{pad}  {v}" for v in values)
        self.lines.append(f"{pad}  END_{key}")

    def open(self, name: str, arg: str = "") -> None:
        self.lines.append(f"{'  ' * self.depth}{name} {arg}".rstrip() + " {")
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        self.lines.append(f"{'  ' * self.depth}}}")
        if self.depth == 0:
            self.lines.append("")

    def text(self) -> str:
        assert self.depth == 0
        return "\n".join(self.lines).rstrip("\n") + "\n"


def _httpd_config(site: OlsSite, settings: OlsSettings) -> str:
    c = _Conf("OpenLiteSpeed server configuration for the Clarke testbed's server role")
    c.kv("user", site.user)
    c.kv("group", site.group)
    c.kv("httpdWorkers", 1)
    c.kv("mime", "conf/mime.properties")
    c.kv("disableWebAdmin", 1)
    c.kv("statDir", site.state_dir / "status")
    c.lines.append("")

    c.open("errorlog", str(site.error_log))
    c.kv("logLevel", "DEBUG")
    c.kv("debugLevel", DEBUG_LEVEL)
    c.kv("rollingSize", 0)
    c.kv("enableStderrLog", 1)
    c.close()

    c.open("accessLog", str(site.access_log))
    c.kv("logFormat", LOG_FORMAT)
    c.kv("rollingSize", 0)
    c.kv("keepDays", 0)
    c.kv("compressArchive", 0)
    c.close()

    c.open("tuning")
    c.kv("fileETag", 0)
    c.kv("enableGzipCompress", 0)
    c.kv("enableDynGzipCompress", 0)
    c.kv("gzipAutoUpdateStatic", 0)
    c.kv("brStaticCompressLevel", 0)
    c.kv("shmDefaultDir", site.state_dir / "shm")
    c.kv("quicEnable", 1)
    c.kv("quicShmDir", site.state_dir / "shm")
    c.kv("quicCongestionCtrl", settings.quic_congestion_ctrl)
    c.close()

    c.open("fileAccessControl")
    c.kv("requiredPermissionMask", "000")
    c.kv("restrictedPermissionMask", "000")
    c.close()

    c.open("module", "cache")
    c.kv("ls_enabled", 0)
    c.close()

    c.open("virtualHost", VHOST)
    c.kv("vhRoot", f"{site.pages_dir}/")
    c.kv("configFile", VHCONF)
    c.kv("enableScript", 0)
    c.kv("restrained", 1)
    c.close()

    c.open("listener", VHOST)
    c.kv("address", site.address)
    c.kv("secure", 1)
    c.kv("keyFile", site.key_file)
    c.kv("certFile", site.cert_file)
    c.kv("certChain", 1)
    c.kv("sslProtocol", SSL_PROTOCOL)
    c.kv("enableSpdy", ENABLE_SPDY)
    c.kv("enableQuic", 1)
    c.kv("map", f"{VHOST} {', '.join((site.host, *site.extra_domains))}")
    c.close()
    return c.text()


def _vhconf(site: OlsSite) -> str:
    c = _Conf(f"OpenLiteSpeed virtual host '{VHOST}': the pages, served as static files")
    c.kv("docRoot", f"{site.pages_dir}/")
    c.kv("enableGzip", 0)
    c.kv("enableBr", 0)
    c.lines.append("")

    c.open("index")
    c.kv("useServer", 0)
    c.kv("indexFiles", "index.html")
    c.kv("autoIndex", 0)
    c.close()

    c.open("accessLog")
    c.kv("useServer", 1)
    c.close()

    c.open("expires")
    c.kv("enableExpires", 0)
    c.close()

    c.open("context", "/")
    c.kv("location", f"{site.pages_dir}/")
    c.kv("allowBrowse", 1)
    c.kv("enableExpires", 0)
    c.multiline("extraHeaders", NO_REUSE_HEADERS)
    c.close()

    c.open("rewrite")
    c.kv("enable", 0)
    c.close()
    return c.text()


def render(site: OlsSite, settings: OlsSettings) -> dict[str, str]:
    """{path relative to the OpenLiteSpeed server root: file text}."""
    return {HTTPD_CONFIG: _httpd_config(site, settings), VHCONF: _vhconf(site)}


def write(server_root: Path, site: OlsSite, settings: OlsSettings) -> list[Path]:
    """Write render()'s files under `server_root` (each replaced atomically)."""
    written = []
    for rel, text in render(site, settings).items():
        path = Path(server_root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written
