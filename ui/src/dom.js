// Small DOM helpers. Text from the API (job names, reasons, log lines) only ever becomes text
// nodes, never markup.

// el("a", {href: "#/jobs", class: "x", onclick: fn}, "text", childNode, ...)
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(node.dataset, value);
    } else {
      node.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(node, c);
    else node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
  return node;
}

// Replaces node's children.
export function fill(node, ...children) {
  clear(node);
  append(node, children);
  return node;
}

export function stateBadge(state) {
  return el("span", { class: "state state-" + String(state).toLowerCase(), "data-state": state }, state);
}

// A bar of `fraction` (0..1) with a label.
export function bar(fraction, label, kind = "") {
  const f = Math.max(0, Math.min(1, Number(fraction) || 0));
  const fillNode = el("span", { class: "bar-fill " + kind });
  fillNode.style.width = (f * 100).toFixed(1) + "%";
  return el("span", { class: "bar", title: label }, fillNode, el("span", { class: "bar-label" }, label));
}

export function percent(x, digits = 1) {
  return x === null || x === undefined ? "–" : (x * 100).toFixed(digits) + " %";
}

// "3 s ago", "4 min ago" from an RFC 3339 time.
export function ago(time) {
  const t = Date.parse(time);
  if (!Number.isFinite(t)) return "";
  const s = Math.max(0, Math.round((Date.now() - t) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return (s / 3600).toFixed(1) + " h ago";
  return (s / 86400).toFixed(1) + " d ago";
}

// `s` seconds for people: "42 s", "3.1 min", "1.2 h".
export function duration(s) {
  if (s < 60) return Math.round(s) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}

// Calls fn at most once per `ms`, the last call winning (for refetching on bursts of events).
export function throttle(fn, ms) {
  let timer = null;
  let again = false;
  const run = () => {
    timer = null;
    if (again) {
      again = false;
      fn();
      timer = setTimeout(run, ms);
    }
  };
  return () => {
    again = true;
    if (!timer) run();
  };
}
