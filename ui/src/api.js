// weft's REST API from the page: the token kept in this tab's sessionStorage and sent as the
// bearer header (never a cookie, never in a URL), JSON answers, the API's error body, and
// server-sent events read through fetch (EventSource cannot send a header).

const TOKEN_KEY = "weft.token";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  closeSharedEvents(); // opened with the token before: never read on with another, or none
  if (value) {
    sessionStorage.setItem(TOKEN_KEY, value);
  } else {
    sessionStorage.removeItem(TOKEN_KEY);
  }
}

// An answer that is not 2xx: `status` is the HTTP code, `message` the API's error.message.
export class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

// Called with the ApiError of any 401, so the page can ask for a token again.
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) {
  onUnauthorized = fn;
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const t = token();
  if (t) h.Authorization = "Bearer " + t;
  return h;
}

async function failure(res) {
  let message = res.status + " " + res.statusText;
  try {
    const body = await res.json();
    if (body && body.error && body.error.message) message = body.error.message;
  } catch (e) {
    // not the API's JSON error body: keep the status line
  }
  const err = new ApiError(res.status, message, Number(res.headers.get("Retry-After")) || 0);
  if (res.status === 401) onUnauthorized(err);
  return err;
}

// GET (or `method`) `path` and its JSON body; throws ApiError.
export async function api(path, method = "GET", signal = undefined) {
  const res = await fetch(path, { method, headers: headers({ Accept: "application/json" }), signal });
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return null;
  return res.json();
}

// Downloads `path` (a model) with the bearer header and saves it as `filename`.
export async function download(path, filename) {
  const res = await fetch(path, { headers: headers() });
  if (!res.ok) throw await failure(res);
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// Reads a text body as it arrives, calling onText(chunk) for each piece, until it ends or
// `signal` aborts. Throws ApiError for an answer that is not 2xx.
export async function readText(path, onText, signal) {
  const res = await fetch(path, { headers: headers(), signal });
  if (!res.ok) throw await failure(res);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    onText(decoder.decode(value, { stream: true }));
  }
}

// Splits a text/event-stream body into events (the WHATWG format: `event:`, `data:`, `id:` and
// `retry:` fields, a blank line ends an event, `:` starts a comment).
export class SseParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = "";
    this.reset();
    this.lastId = "";
    this.retryMs = 2000;
  }
  reset() {
    this.type = "";
    this.data = [];
  }
  push(text) {
    this.buffer += text;
    let nl;
    while ((nl = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buffer.slice(0, nl);
      const eol = this.buffer[nl] === "\r" && this.buffer[nl + 1] === "\n" ? 2 : 1;
      this.buffer = this.buffer.slice(nl + eol);
      this.line(line);
    }
  }
  line(line) {
    if (line === "") {
      if (this.data.length > 0) {
        this.onEvent({ type: this.type || "message", data: this.data.join("\n"), id: this.lastId });
      }
      this.reset();
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.type = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.lastId = value;
    else if (field === "retry" && /^\d+$/.test(value)) this.retryMs = Number(value);
  }
}

// One server-sent-events stream of the API (/v1/events, /v1/jobs/{id}/events): calls
// onEvent(type, data) with each event's parsed JSON. When the stream ends it reconnects after
// the server's retry delay, sending Last-Event-ID so nothing is missed, unless `reconnect()`
// returns false. onStatus(text) tells the page whether it is live. Returns {close()}.
export function subscribe(path, { onEvent, onStatus = () => {}, reconnect = () => true }) {
  const abort = new AbortController();
  let lastId = "";
  let closed = false;
  const run = async () => {
    while (!closed) {
      const parser = new SseParser((e) => {
        lastId = e.id;
        let data = null;
        try {
          data = JSON.parse(e.data);
        } catch (err) {
          return;
        }
        onEvent(e.type, data);
      });
      let waitMs = 2000;
      try {
        const h = headers({ Accept: "text/event-stream" });
        if (lastId) h["Last-Event-ID"] = lastId;
        const res = await fetch(path, { headers: h, signal: abort.signal });
        if (!res.ok) throw await failure(res);
        onStatus("live");
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          parser.push(decoder.decode(value, { stream: true }));
        }
        waitMs = parser.retryMs;
        if (!reconnect()) {
          onStatus("ended");
          return;
        }
      } catch (err) {
        if (closed) return;
        if (err instanceof ApiError && err.status === 401) return;
        if (err instanceof ApiError && err.retryAfter) waitMs = err.retryAfter * 1000;
        onStatus("reconnecting: " + err.message);
      }
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  };
  run();
  return {
    close() {
      closed = true;
      abort.abort();
    },
  };
}

// The dashboard's one stream of GET /v1/events, shared by its pages. weftd gives a tenant a few
// streams at once (--follow-streams-per-tenant, 4 by default) and a stream a page closed keeps
// its place for the second or so weftd takes to notice, so a stream per page ran out of places
// (429) when someone went through the pages quickly. listen() takes the same handlers as
// subscribe(); the stream opens with the first listener and closes LINGER_MS after the last one
// left (the next page's listener keeps it open), or at once when the token changes. A listener
// that joins a live stream is told so at once.
const LINGER_MS = 5000;
const shared = { stream: null, status: "", listeners: new Set(), closing: null };

export function listen({ onEvent, onStatus = () => {} }) {
  const listener = { onEvent, onStatus };
  shared.listeners.add(listener);
  clearTimeout(shared.closing);
  shared.closing = null;
  if (!shared.stream) {
    shared.status = "";
    shared.stream = subscribe("/v1/events", {
      onEvent: (type, data) => [...shared.listeners].forEach((l) => l.onEvent(type, data)),
      onStatus: (text) => {
        shared.status = text;
        [...shared.listeners].forEach((l) => l.onStatus(text));
      },
    });
  } else if (shared.status) {
    onStatus(shared.status);
  }
  return {
    close() {
      if (!shared.listeners.delete(listener) || shared.listeners.size > 0) return;
      shared.closing = setTimeout(closeSharedEvents, LINGER_MS);
    },
  };
}

function closeSharedEvents() {
  clearTimeout(shared.closing);
  shared.closing = null;
  if (shared.stream) shared.stream.close();
  shared.stream = null;
  shared.status = "";
}
