"""The client's HTTP: one request per connection over http.client (the standard library), TLS
verified against a CA file or the system's roots, and weftd's errors raised as ApiError."""
import http.client
import json
import ssl
import urllib.parse
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

from .errors import ConnectionFailed, error_for

# Bodies of JSON answers are read whole; weftd bounds what it sends (a page of metrics, a job).
_MAX_JSON_BYTES = 64 << 20


def split_server(server: str) -> Tuple[str, str, int]:
    """("http"|"https", host, port) of "HOST:PORT", "http://HOST:PORT" or "https://HOST:PORT".

    Raises ValueError for anything else.
    """
    text = server.strip()
    scheme = "http"
    if "://" in text:
        scheme, text = text.split("://", 1)
    if scheme not in ("http", "https"):
        raise ValueError("server %r: the scheme must be http or https" % server)
    text = text.rstrip("/")
    if "/" in text or not text:
        raise ValueError("server %r: expected HOST:PORT, optionally with http:// or https://"
                         % server)
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, "443" if scheme == "https" else "8470"
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit():
        raise ValueError("server %r: expected HOST:PORT" % server)
    return scheme, host, int(port)


class Transport:
    """Requests to one weftd with one token.

    Args:
        server: "HOST:PORT" or a URL (https:// for a weftd with a certificate).
        token: the bearer token (a tenant's or the admin's).
        ca_file: PEM file of the CA (or the self-signed certificate) weftd's certificate is
            checked against; None uses the system's roots.
        timeout: seconds to wait for weftd on each read (None: forever, for streams).
    """

    def __init__(self, server: str, token: str, ca_file: Optional[str] = None,
                 timeout: Optional[float] = 30.0) -> None:
        self.scheme, self.host, self.port = split_server(server)
        self.token = token
        self.timeout = timeout
        self._tls: Optional[ssl.SSLContext] = None
        if self.scheme == "https":
            self._tls = ssl.create_default_context(cafile=ca_file)

    @property
    def url(self) -> str:
        host = "[%s]" % self.host if ":" in self.host else self.host
        return "%s://%s:%d" % (self.scheme, host, self.port)

    def open(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
             body: Optional[bytes] = None, content_type: Optional[str] = None,
             headers: Optional[Mapping[str, str]] = None,
             timeout: Optional[float] = -1.0) -> http.client.HTTPResponse:
        """Sends the request and returns the open response of a 2xx answer (the caller reads
        and closes it). Raises ApiError (a subclass by status) for any other answer and
        ConnectionFailed when weftd cannot be reached. `timeout` -1 means the transport's."""
        if query:
            pairs = [(k, _query_value(v)) for k, v in query.items() if v is not None]
            if pairs:
                path += "?" + urllib.parse.urlencode(pairs)
        wait = self.timeout if timeout == -1.0 else timeout
        if self._tls is not None:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=wait, context=self._tls)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=wait)
        sent = {"Authorization": "Bearer " + self.token, "Accept-Encoding": "identity",
                "Connection": "close"}
        if content_type:
            sent["Content-Type"] = content_type
        sent.update(headers or {})
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionFailed("cannot reach weftd at %s: %s" % (self.url, e)) from e
        if 200 <= response.status < 300:
            return response
        try:
            raw = response.read(_MAX_JSON_BYTES)
        except (OSError, http.client.HTTPException):
            raw = b""
        finally:
            conn.close()
        raise _error(response, raw)

    def json(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
             body: Any = None) -> Any:
        """A request whose answer is JSON; `body`, if not None, is sent as JSON."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        response = self.open(method, path, query=query, body=data,
                             content_type="application/json" if data is not None else None)
        with response:
            raw = response.read(_MAX_JSON_BYTES + 1)
        if len(raw) > _MAX_JSON_BYTES:
            raise ConnectionFailed("weftd's answer to %s %s is over %d bytes"
                                   % (method, path, _MAX_JSON_BYTES))
        return json.loads(raw) if raw else None

    def lines(self, response: http.client.HTTPResponse) -> Iterator[str]:
        """The lines of a streamed answer as they arrive, without their line ends; closes it
        when done."""
        with response:
            while True:
                line = response.readline(1 << 20)
                if not line:
                    return
                yield line.decode("utf-8", "replace").rstrip("\r\n")


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _error(response: http.client.HTTPResponse, raw: bytes) -> Exception:
    code, message, details = "", "", None
    try:
        body: Dict[str, Any] = json.loads(raw) if raw else {}
        err = body.get("error", {}) if isinstance(body, dict) else {}
        if isinstance(err, dict):
            code = str(err.get("code", ""))
            message = str(err.get("message", ""))
            if isinstance(err.get("details"), list):
                details = [d for d in err["details"] if isinstance(d, dict)]
    except ValueError:
        message = raw.decode("utf-8", "replace")[:500]
    if not message:
        message = response.reason or ""
    retry_after: Optional[float] = None
    header = response.getheader("Retry-After")
    if header:
        try:
            retry_after = float(header)
        except ValueError:
            retry_after = None
    return error_for(response.status, code, message, details, retry_after)
