"""weft from Python: a Client for one weftd and a Job for each training job.

    import weft
    client = weft.Client()                       # WEFT_SERVER, WEFT_TOKEN, WEFT_CA_CERT
    job = client.submit("examples/fashion-mnist-cnn.yaml",
                        overrides={"training.learning_rate": 3e-4})
    for event in job.events():                   # server-sent events, resumed after a restart
        print(event.type, event.data.get("state"))
    job.wait()                                   # until COMPLETED, FAILED or HALTED
    points = job.metrics()                       # every metric point, oldest first
    model = job.load()                           # torch.jit.load of the final model

Times are seconds unless a name says otherwise (wall_time_ms in metric points is Unix time in
milliseconds, as the API gives it). Every call raises weft.ApiError (a subclass per status:
BadRequest with the fields at fault, NotFound, Conflict, ...) for weftd's refusals and
weft.ConnectionFailed when weftd cannot be reached.
"""
import http.client
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from ._http import Transport
from .errors import ConnectionFailed, WeftError

__all__ = ["Client", "Job", "Event", "SETTLED_STATES", "apply_overrides"]

# The states a job stays in until someone acts (docs/manifest.md): the end of wait()'s default.
SETTLED_STATES = ("COMPLETED", "FAILED", "HALTED")

Manifest = Union[str, "os.PathLike[str]", Mapping[str, Any]]


@dataclass
class Event:
    """One server-sent event of a job's stream (docs/openapi.yaml JobEvent).

    Attributes:
        id: "RUN-SEQ": the weftd run that sent it and its number in that run.
        type: "job" (the whole job, first on a fresh stream), "state", "progress", "model",
            "waiting" or "deleted".
        data: the event's JSON: job, tenant, time, state and what its type adds.
    """
    id: str
    type: str
    data: Dict[str, Any] = field(default_factory=dict)


def apply_overrides(manifest: Dict[str, Any], overrides: Mapping[str, Any]) -> Dict[str, Any]:
    """A copy of `manifest` with each dotted path of `overrides` set to its value
    ("training.learning_rate": 3e-4 sets manifest["training"]["learning_rate"]), creating the
    mappings on the way. weftd validates the result like any manifest: a wrong value or an
    unknown field is a 400 naming the path. Raises ValueError for an empty path segment or one
    that crosses a value that is not a mapping."""
    out = json.loads(json.dumps(manifest))
    for path, value in overrides.items():
        parts = str(path).split(".")
        if any(not p for p in parts):
            raise ValueError("override %r: empty field name" % path)
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError("override %r: %s is not a mapping"
                                 % (path, ".".join(parts[:i + 1])))
            node = child
        node[parts[-1]] = value
    return out


def _read_manifest(manifest: Manifest) -> Union[str, Dict[str, Any]]:
    """The manifest as YAML text or a dict: a mapping as it is, a path's file, or text."""
    if isinstance(manifest, Mapping):
        return dict(manifest)
    if isinstance(manifest, os.PathLike) or ("\n" not in str(manifest)
                                             and os.path.isfile(str(manifest))):
        with open(os.fspath(manifest), encoding="utf-8") as f:
            return f.read()
    return str(manifest)


def _parse_yaml(text: str) -> Dict[str, Any]:
    try:
        import yaml  # Debian's python3-yaml
    except ImportError as e:
        raise WeftError("overrides of a YAML manifest need PyYAML (apt install python3-yaml); "
                        "or pass the manifest as a dict") from e
    parsed = yaml.safe_load(text)
    if not isinstance(parsed, dict):
        raise WeftError("the manifest is not a YAML mapping")
    return parsed


class Job:
    """One job of the client's tenant (or any job, for the admin).

    Attributes:
        id: the job's id ("job-…").
        info: the job as weftd last showed it (refresh() reads it again).
    """

    def __init__(self, client: "Client", job_id: str, info: Optional[Dict[str, Any]] = None):
        self.id = job_id
        self.info: Dict[str, Any] = dict(info or {})
        self._client = client

    def __repr__(self) -> str:
        return "Job(%r, state=%r)" % (self.id, self.info.get("state"))

    def _path(self, tail: str = "") -> str:
        return "/v1/jobs/" + self.id + tail

    def refresh(self) -> Dict[str, Any]:
        """Reads the job again (GET /v1/jobs/ID): its state, progress, models, history.
        NotFound if it does not exist or is another tenant's."""
        self.info = self._client._http.json("GET", self._path())
        return self.info

    @property
    def state(self) -> str:
        """The job's state now (one request)."""
        return str(self.refresh().get("state", ""))

    def events(self, reconnect_for: float = 60.0) -> Iterator[Event]:
        """The job's events as they happen (GET /v1/jobs/ID/events), until the event that
        settles it (COMPLETED, FAILED, HALTED) or deletes it.

        A broken stream (weftd restarted, a standby took over) is opened again with the last
        event's id, so nothing weftd still holds is missed; when it no longer holds them the
        stream starts again with a "job" event. Raises ConnectionFailed when weftd stays
        unreachable for `reconnect_for` seconds, and ApiError for its refusals (NotFound, 429).
        """
        last_id: Optional[str] = None
        down_since: Optional[float] = None
        while True:
            headers = {"Last-Event-ID": last_id} if last_id else {}
            try:
                response = self._client._http.open("GET", self._path("/events"), headers=headers,
                                                   timeout=None)
            except ConnectionFailed:
                down_since = down_since or time.monotonic()
                if time.monotonic() - down_since > reconnect_for:
                    raise
                time.sleep(0.5)
                continue
            down_since = None
            ended = False
            try:
                for event in _parse_events(self._client._http.lines(response)):
                    last_id = event.id or last_id
                    yield event
                    if _ends_stream(event):
                        ended = True
                        return
            except (OSError, http.client.HTTPException):
                pass  # the connection broke: open it again from last_id
            if ended:
                return
            time.sleep(0.5)  # the stream ended before the job settled: weftd went away

    def wait(self, states: Sequence[str] = SETTLED_STATES, timeout: Optional[float] = None,
             reconnect_for: float = 60.0) -> Dict[str, Any]:
        """Blocks until the job is in one of `states` and returns it as refresh() shows it.

        Follows the event stream (no polling). Raises TimeoutError once `timeout` seconds have
        passed (checked as events arrive: a waiting or training job sends one at least every
        few seconds), WeftError if the job settles or is deleted in a state not asked for (it
        would never get there), and the errors of events().
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        wanted = set(states)
        if self.state in wanted:
            return self.info
        for event in self.events(reconnect_for=reconnect_for):
            state = str(event.data.get("state", ""))
            if event.type != "deleted" and state in wanted:
                return self.refresh()
            if _ends_stream(event):
                raise WeftError("job %s ended %s without reaching %s"
                                % (self.id, "deleted" if event.type == "deleted" else state,
                                   " or ".join(sorted(wanted))))
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("job %s is %s after %.0f s" % (self.id, state, timeout))
        return self.refresh()

    def metrics(self, frame: bool = False) -> Any:
        """Every metric point of the job, oldest first (GET /v1/jobs/ID/metrics, all pages):
        dicts with step, epoch, wall_time_ms (Unix ms), train_loss and samples_per_s on training
        points, test_accuracy and test_loss on evaluation points. With `frame`, a
        pandas.DataFrame of them (ImportError without pandas)."""
        points: List[Dict[str, Any]] = []
        start = 0
        while True:
            page = self._client._http.json("GET", self._path("/metrics"),
                                           query={"from": start, "limit": 10000})
            points.extend(page.get("points", []))
            if page.get("next") is None:
                break
            start = int(page["next"])
        if frame:
            import pandas  # optional: pip's extra "frames", Debian's python3-pandas
            return pandas.DataFrame(points)
        return points

    def logs(self, rank: int = 0, follow: bool = False, server: Optional[int] = None
             ) -> Union[str, Iterator[str]]:
        """Learner `rank`'s log (stdout and stderr) — or with `server`, that weft-ps server's —
        as one string, or with `follow` an iterator over its lines as they are written, until
        the job ends."""
        query: Dict[str, Any] = {"rank": rank, "follow": follow or None, "server": server}
        response = self._client._http.open("GET", self._path("/logs"), query=query,
                                           timeout=None if follow else -1.0)
        if follow:
            return self._client._http.lines(response)
        with response:
            return response.read().decode("utf-8", "replace")

    def download(self, which: str = "final", path: Optional[str] = None) -> str:
        """Writes the job's `which` model ("delivered" or "final", TorchScript) to `path`
        (default: ./JOB-WHICH.pt) and returns the path. NotFound until that model exists."""
        target = path or "%s-%s.pt" % (self.id, which)
        response = self._client._http.open("GET", self._path("/model"), query={"which": which})
        partial = target + ".part"
        with response, open(partial, "wb") as f:
            while True:
                chunk = response.read(1 << 20)
                if not chunk:
                    break
                f.write(chunk)
        os.replace(partial, target)
        return target

    def load(self, which: str = "final", path: Optional[str] = None) -> Any:
        """download(which, path), then torch.jit.load of it (ImportError without torch)."""
        import torch  # optional: Debian's python3-torch
        return torch.jit.load(self.download(which, path))

    def halt(self) -> Dict[str, Any]:
        """Stops the job (HALTED; each learner checkpoints first). Conflict if it already
        ended."""
        self.info = self._client._http.json("POST", self._path("/halt"))
        return self.info

    def resume(self) -> Dict[str, Any]:
        """Queues a HALTED job again; it goes on from its latest checkpoint. Conflict if it is
        not HALTED."""
        self.info = self._client._http.json("POST", self._path("/resume"))
        return self.info

    def delete(self) -> None:
        """Stops the job and removes it with its history, metrics, logs and models."""
        self._client._http.json("DELETE", self._path())


def _parse_events(lines: Iterable[str]) -> Iterator[Event]:
    """Server-sent events (the WHATWG format) from a stream's lines."""
    event_id, event_type, data = "", "", []  # type: str, str, List[str]
    for line in lines:
        if not line:
            if data:
                try:
                    payload = json.loads("\n".join(data))
                except ValueError:
                    payload = {"raw": "\n".join(data)}
                yield Event(event_id, event_type or "message",
                            payload if isinstance(payload, dict) else {"value": payload})
            event_type, data = "", []
            continue
        if line.startswith(":"):
            continue  # a comment: the stream's keep-alive
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            event_id = value
        elif name == "event":
            event_type = value
        elif name == "data":
            data.append(value)


def _ends_stream(event: Event) -> bool:
    if event.type == "deleted":
        return True
    return event.type in ("state", "job") and event.data.get("state") in SETTLED_STATES


class Client:
    """A connection to one weftd with one token.

    Args:
        server: "HOST:PORT" or an http(s):// URL; default $WEFT_SERVER, else 127.0.0.1:8470.
        token: a tenant's token or the admin's; default $WEFT_TOKEN.
        ca_file: the CA (or self-signed certificate) of an https weftd; default $WEFT_CA_CERT,
            else the system's roots.
        timeout: seconds to wait for weftd on each read (streams wait without a limit).
    Raises WeftError when there is no token.
    """

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None,
                 ca_file: Optional[str] = None, timeout: float = 30.0) -> None:
        server = server or os.environ.get("WEFT_SERVER") or "127.0.0.1:8470"
        token = token or os.environ.get("WEFT_TOKEN")
        if not token:
            raise WeftError("no token: pass token= or set WEFT_TOKEN (the admin's is in "
                            "<data-dir>/admin.token)")
        self._http = Transport(server, token, ca_file or os.environ.get("WEFT_CA_CERT") or None,
                               timeout)

    @property
    def server(self) -> str:
        """weftd's URL."""
        return self._http.url

    def whoami(self) -> Dict[str, Any]:
        """{"admin": bool, "tenant": name or None}: whose the token is."""
        return self._http.json("GET", "/v1/whoami")

    # --- jobs ---

    def submit(self, manifest: Manifest, uploads: Optional[Mapping[str, str]] = None,
               overrides: Optional[Mapping[str, Any]] = None) -> Job:
        """Submits a job and returns it (QUEUED).

        Args:
            manifest: a dict, YAML text, or the path of a YAML (or JSON) file.
            uploads: {artifact name: local path}: files uploaded as the tenant's artifacts
                first, for a manifest that names them (a TorchScript model, a code archive).
            overrides: {"dotted.field": value} set in the manifest before it is sent
                (apply_overrides); a YAML manifest is parsed with PyYAML for that.
        Raises BadRequest naming each field at fault, Conflict at a job limit,
        InsufficientStorage at the disk quota.
        """
        for name, path in (uploads or {}).items():
            self.upload_artifact(name, path)
        body = _read_manifest(manifest)
        if overrides:
            parsed = body if isinstance(body, dict) else _parse_yaml(body)
            body = apply_overrides(parsed, overrides)
        if isinstance(body, dict):
            info = self._http.json("POST", "/v1/jobs", body=body)
        else:
            response = self._http.open("POST", "/v1/jobs", body=body.encode("utf-8"),
                                       content_type="application/yaml")
            with response:
                info = json.loads(response.read())
        return Job(self, info["id"], info)

    def job(self, job_id: str) -> Job:
        """The job `job_id`, read now. NotFound if it does not exist or is another tenant's."""
        job = Job(self, job_id)
        job.refresh()
        return job

    def jobs(self) -> List[Job]:
        """Every job of the caller (the admin: every job), in submission order."""
        out: List[Job] = []
        after: Optional[str] = None
        while True:
            page = self._http.json("GET", "/v1/jobs", query={"limit": 1000, "after": after})
            out.extend(Job(self, j["id"], j) for j in page.get("jobs", []))
            after = page.get("next")
            if not after:
                return out

    # --- artifacts, data sets, webhooks (a tenant's) ---

    def upload_artifact(self, name: str, path: str) -> Dict[str, Any]:
        """Uploads the file at `path` as artifact `name` (replacing what the name held)."""
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            response = self._http.open("POST", "/v1/artifacts", query={"name": name},
                                       body=f, content_type="application/octet-stream",
                                       headers={"Content-Length": str(size)}, timeout=300.0)
        with response:
            return json.loads(response.read())

    def artifacts(self) -> Dict[str, Any]:
        """{"artifacts": [...], "bytes_used", "bytes_quota", "max_artifact_bytes"}."""
        return self._http.json("GET", "/v1/artifacts")

    def delete_artifact(self, name: str) -> None:
        """Deletes artifact `name`. NotFound if the tenant has none by that name."""
        self._http.json("DELETE", "/v1/artifacts/" + name)

    def datasets(self) -> List[Dict[str, Any]]:
        """The data sets the caller may name in a manifest's data.dataset."""
        return self._http.json("GET", "/v1/datasets").get("datasets", [])

    def webhooks(self) -> List[Dict[str, Any]]:
        """The tenant's webhooks: id, url, events, created, last_status, pending (no secrets)."""
        return self._http.json("GET", "/v1/webhooks").get("webhooks", [])

    def create_webhook(self, url: str, events: Sequence[str]) -> Dict[str, Any]:
        """Registers a webhook for the tenant's jobs entering `events` (states); the answer holds
        its signing secret, shown only now."""
        return self._http.json("POST", "/v1/webhooks", body={"url": url, "events": list(events)})

    def delete_webhook(self, webhook_id: str) -> None:
        """Deletes the webhook and its deliveries not yet made. NotFound if it is not the
        tenant's."""
        self._http.json("DELETE", "/v1/webhooks/" + webhook_id)

    # --- tenants and tokens (the admin's) ---

    def create_tenant(self, name: str, quota: Optional[Mapping[str, Any]] = None,
                      weight: Optional[float] = None,
                      disk_quota_mb: Optional[int] = None) -> Dict[str, Any]:
        """Creates tenant `name`; quota {"cpus", "memory_mb", "gpus"} (None: no quota), weight
        its fair-share weight, disk_quota_mb in MiB (None: weftd's default)."""
        body: Dict[str, Any] = {"name": name}
        if quota is not None:
            body["quota"] = dict(quota)
        if weight is not None:
            body["weight"] = weight
        if disk_quota_mb is not None:
            body["disk_quota_mb"] = disk_quota_mb
        return self._http.json("POST", "/v1/tenants", body=body)

    def tenants(self) -> List[Dict[str, Any]]:
        """Every tenant: name, created, quota, weight, disk_quota_mb, disk (bytes used and the
        quota) and usage (running and queued jobs, resources used, dominant and fair share)."""
        return self._http.json("GET", "/v1/tenants").get("tenants", [])

    def tenant(self, name: str) -> Dict[str, Any]:
        """Tenant `name` as tenants() lists it. NotFound if there is none."""
        return self._http.json("GET", "/v1/tenants/" + name)

    def update_tenant(self, name: str, **changes: Any) -> Dict[str, Any]:
        """Changes quota (None removes it), weight or disk_quota_mb."""
        return self._http.json("PATCH", "/v1/tenants/" + name, body=changes)

    def delete_tenant(self, name: str) -> None:
        """Deletes tenant `name` with its tokens and artifacts. Conflict while it owns jobs."""
        self._http.json("DELETE", "/v1/tenants/" + name)

    def create_token(self, tenant: str) -> str:
        """A new token of `tenant` (shown only now)."""
        return str(self._http.json("POST", "/v1/tenants/%s/tokens" % tenant)["token"])

    def tokens(self, tenant: str) -> List[Dict[str, Any]]:
        """The tenant's tokens: id, created and revoked (a time or None); never a token itself."""
        return self._http.json("GET", "/v1/tenants/%s/tokens" % tenant).get("tokens", [])

    def revoke_token(self, tenant: str, token_id: str) -> None:
        """Revokes the token: weftd refuses it from the next request on."""
        self._http.json("DELETE", "/v1/tenants/%s/tokens/%s" % (tenant, token_id))

