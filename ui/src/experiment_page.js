// Experiments (hyperparameter searches): the list, and one experiment's page — its searcher and
// rungs, the trials table, each trial's test accuracy curve on one chart, the best-so-far curve
// over time, and a hyperparameter-against-metric plot — with halt / resume / delete. The pages
// read GET /v1/experiments[/{id}] and the trials' GET /v1/jobs/{job}/metrics, then follow
// GET /v1/events: an "experiment" event (a trial started, a result, a new best, a new state) or
// a trial's state reads them again; a trial's progress adds its new points to the curves.
import { api, listen } from "./api.js";
import { chart } from "./chart.js";
import { ago, el, fill, stateBadge, throttle } from "./dom.js";

// A load follows a burst of events at most this often.
const RELOAD_MS = 1000;
// Trials whose curves are drawn at most (the first ones), and points read per trial.
const MAX_CURVES = 64;
const POINTS_PER_TRIAL = 1000;
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

function metric(v) {
  return v === null || v === undefined ? "–" : Number(v).toFixed(4);
}

function values(trial) {
  return Object.entries(trial.values || {})
    .map(([k, v]) => k.replace(/^(training|model)\./, "") + "=" + v)
    .join(" ");
}

// Calls `load(signal)` now, then again — one load at a time, at most once per RELOAD_MS —
// whenever an event of GET /v1/events passes `wants(type, data)` (or the stream was reset);
// `onEvent(type, data)` sees every event first. The returned function leaves the page: it closes
// the stream and aborts the requests in flight (`signal`: pass it to api), so no request goes out
// after the page is left (or the token is gone).
function live(ctx, load, wants, onEvent = () => {}) {
  const abort = new AbortController();
  let running = null;
  const run = async () => {
    if (abort.signal.aborted) return;
    while (running) await running;
    running = load(abort.signal).catch((err) => {
      if (!abort.signal.aborted) throw err;
    });
    await running;
    running = null;
  };
  const reload = throttle(run, RELOAD_MS);
  run();
  const stream = listen({
    onStatus: ctx.setLive,
    onEvent: (type, data) => {
      onEvent(type, data);
      if (type === "reset" || wants(type, data)) reload();
    },
  });
  return () => {
    abort.abort();
    stream.close();
  };
}

export function experimentsPage(main, ctx) {
  const body = el("tbody");
  const problem = el("div");
  const headers = ["Experiment", "Name", ctx.admin ? "Tenant" : null, "State", "Best", "Best trial",
    "Delivered by", "Updated", "Reason"].filter((h) => h !== null);
  fill(
    main,
    el("h1", {}, "Experiments"),
    el("p", { class: "muted" }, "Hyperparameter searches: weft experiment submit FILE"),
    problem,
    el("table", { id: "experiments", class: "grid" },
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))), body),
  );
  const load = async (signal) => {
    try {
      const list = await api("/v1/experiments", "GET", signal);
      fill(problem);
      fill(
        body,
        list.experiments.map((e) =>
          el("tr", { dataset: { id: e.id } },
            el("td", {}, el("a", { href: "#/experiments/" + encodeURIComponent(e.id) }, e.id)),
            el("td", {}, e.name),
            ctx.admin ? el("td", {}, e.tenant) : null,
            el("td", {}, stateBadge(e.state)),
            el("td", {}, metric(e.best_metric)),
            el("td", {}, e.best_job ? el("a", { href: "#/jobs/" + encodeURIComponent(e.best_job) }, e.best_job) : "–"),
            el("td", {}, e.delivered_job || "–"),
            el("td", {}, ago(e.updated_at)),
            el("td", { class: "reason" }, e.reason))),
      );
      if (list.experiments.length === 0) fill(body, el("tr", {}, el("td", { colspan: headers.length }, "no experiments yet")));
    } catch (err) {
      if (signal.aborted) return;
      fill(problem, el("p", { class: "error", role: "alert" }, "cannot list experiments: " + err.message));
    }
  };
  return live(ctx, load, (type) => type === "experiment" || type === "experiment_deleted");
}

// The numeric axis of a dimension's values, or null when they are not all numbers.
function numeric(trials, field) {
  const xs = trials.map((t) => Number(t.values[field]));
  return xs.every((x) => Number.isFinite(x)) ? xs : null;
}

export function experimentPage(main, ctx, id) {
  const title = el("h1", {}, id);
  const summary = el("div", { class: "summary" });
  const actions = el("div", { class: "actions" });
  const message = el("p", { id: "action-message", class: "muted", role: "status" });
  const problem = el("div");
  const rungs = el("p", { id: "rungs" });
  const curvesNode = el("div", { id: "chart-trials", class: "chart" });
  const bestNode = el("div", { id: "chart-best", class: "chart" });
  const scatterNode = el("div", { id: "chart-hyperparameter", class: "chart" });
  const dimension = el("select", { id: "hyperparameter", "aria-label": "hyperparameter" });
  const body = el("tbody");
  fill(
    main,
    el("p", {}, el("a", { href: "#/experiments" }, "← experiments")),
    title, summary, actions, message, problem, rungs,
    el("section", { class: "charts" }, curvesNode, bestNode,
      el("div", {}, el("label", {}, "x: ", dimension), scatterNode)),
    el("section", {},
      el("h2", {}, "Trials"),
      el("table", { id: "trials", class: "grid" },
        el("thead", {}, el("tr", {}, ["Trial", "Job", "State", "Rung", "Epoch", "Results", "Values"].map((h) => el("th", {}, h)))),
        body)),
  );
  const metrics = new Map(); // job -> its evaluation points
  let detail = null;
  let curves = null;
  let curveCount = -1;
  const best = chart(bestNode, "Best so far", [{ label: "best test accuracy", stroke: "#2ca02c" }], { x: "seconds" });
  let scatter = null;
  let scatterKey = "";

  const act = (label, path, method) =>
    el("button", {
      type: "button",
      onclick: async () => {
        try {
          await api(path, method);
          message.textContent = label + ": done";
          if (method === "DELETE") location.hash = "#/experiments";
        } catch (err) {
          message.textContent = label + ": " + err.message;
        }
      },
    }, label);

  const drawCharts = () => {
    const trials = detail.trials.filter((t) => t.job).slice(0, MAX_CURVES);
    if (curves === null || curveCount !== trials.length) {
      if (curves) curves.destroy();
      fill(curvesNode);
      curves = chart(curvesNode, "Trials' test accuracy",
        trials.map((t, i) => ({ label: "t" + t.trial, stroke: COLORS[i % COLORS.length] })), { x: "epoch" });
      curveCount = trials.length;
    }
    const epochs = new Set();
    const byTrial = trials.map((t) => {
      const at = new Map();
      for (const p of metrics.get(t.job) || []) at.set(p.epoch, p.test_accuracy);
      for (const e of at.keys()) epochs.add(e);
      return at;
    });
    const xs = [...epochs].sort((a, b) => a - b);
    curves.update(xs, ...byTrial.map((at) => xs.map((e) => (at.has(e) ? at.get(e) : null))));
    // The best test accuracy any trial had reached, over the experiment's time.
    const start = Date.parse(detail.created_at);
    const all = [];
    for (const list of metrics.values()) for (const p of list) all.push(p);
    all.sort((a, b) => a.wall_time_ms - b.wall_time_ms);
    let top = -Infinity;
    const times = [];
    const tops = [];
    for (const p of all) {
      if (p.test_accuracy <= top) continue;
      top = p.test_accuracy;
      times.push((p.wall_time_ms - start) / 1000);
      tops.push(top);
    }
    best.update(times, tops);
    // One hyperparameter against each trial's latest result.
    const fields = Object.keys((detail.trials[0] || {}).values || {});
    if (dimension.options.length !== fields.length) {
      fill(dimension, fields.map((f) => el("option", { value: f }, f)));
    }
    const field = dimension.value || fields[0];
    const done = detail.trials.filter((t) => t.results.length > 0 && t.results[t.results.length - 1] !== null);
    const numbers = numeric(done, field);
    const choices = [...new Set(done.map((t) => t.values[field]))];
    const xOf = (t) => (numbers ? Number(t.values[field]) : choices.indexOf(t.values[field]));
    const pts = done.map((t) => [xOf(t), t.results[t.results.length - 1]]).sort((a, b) => a[0] - b[0]);
    const positive = numbers && pts.length > 0 && pts[0][0] > 0;
    const logX = positive && pts[pts.length - 1][0] / pts[0][0] > 20;
    const key = field + "|" + logX;
    if (scatter === null || key !== scatterKey) {
      if (scatter) scatter.destroy();
      fill(scatterNode);
      const x = numbers ? field : field + " (" + choices.map((c, i) => i + ": " + c).join(", ") + ")";
      scatter = chart(scatterNode, detail.metric.name + " by " + field,
        [{ label: detail.metric.name, stroke: "#d62728", fill: "#d62728" }], { x, logX, dots: true });
      scatterKey = key;
    }
    scatter.update(pts.map((p) => p[0]), pts.map((p) => p[1]));
  };
  dimension.addEventListener("change", () => detail && drawCharts());

  const render = () => {
    const e = detail;
    title.textContent = e.name + " (" + e.id + ")";
    const s = e.searcher;
    fill(summary, stateBadge(e.state), " ", e.reason,
      el("div", { class: "muted" }, s.name + ", eta " + s.eta + ", epochs " + s.min_resource + ".." + s.max_resource +
        ", at most " + s.max_trials + " trials, " + s.max_concurrent_trials + " at once, seed " + s.seed),
      el("div", {}, "best " + e.metric.name + " ", el("strong", {}, metric(e.best_metric)),
        e.best_job ? [" by ", el("a", { href: "#/jobs/" + encodeURIComponent(e.best_job) }, e.best_job)] : "",
        e.delivered_job ? [" · delivered by ", el("a", { href: "#/jobs/" + encodeURIComponent(e.delivered_job) }, e.delivered_job)] : ""));
    fill(actions,
      e.state === "RUNNING" ? act("Halt", "/v1/experiments/" + id + "/halt", "POST") : null,
      e.state === "HALTED" ? act("Resume", "/v1/experiments/" + id + "/resume", "POST") : null,
      act("Delete", "/v1/experiments/" + id, "DELETE"));
    fill(rungs, "Rungs: ", e.rungs.map((r) => r.epochs + " epochs: " + r.results + " results, " + r.promoted + " promoted").join(" · "));
    fill(body, e.trials.map((t) =>
      el("tr", { dataset: { trial: t.trial } },
        el("td", {}, "t" + t.trial),
        el("td", {}, t.job ? el("a", { href: "#/jobs/" + encodeURIComponent(t.job) }, t.job) : "(deleted)"),
        el("td", {}, t.state ? stateBadge(t.state) : "–"),
        el("td", {}, String(t.rung)),
        el("td", {}, t.job ? t.epoch + "/" + t.epochs_total : "–"),
        el("td", {}, t.results.map(metric).join(" ") || "–"),
        el("td", {}, values(t)))));
  };

  const trialJobs = new Set();
  const load = async (signal) => {
    try {
      detail = await api("/v1/experiments/" + encodeURIComponent(id), "GET", signal);
      for (const t of detail.trials) if (t.job) trialJobs.add(t.job);
      fill(problem);
      render();
      // Curves: read again while a trial trains; a settled trial's are kept.
      for (const t of detail.trials.slice(0, MAX_CURVES)) {
        if (!t.job || (metrics.has(t.job) && ["COMPLETED", "FAILED", "HALTED"].includes(t.state))) continue;
        const path = "/v1/jobs/" + encodeURIComponent(t.job) + "/metrics?limit=" + POINTS_PER_TRIAL;
        const page = await api(path, "GET", signal);
        metrics.set(t.job, page.points.filter((p) => p.test_accuracy !== undefined));
      }
      drawCharts();
    } catch (err) {
      if (signal.aborted) return;
      fill(problem, el("p", { class: "error", role: "alert" }, "cannot read experiment " + id + ": " + err.message));
    }
  };
  const redraw = throttle(() => detail && drawCharts(), RELOAD_MS);
  const stop = live(
    ctx,
    load,
    (type, e) =>
      (e.experiment && e.experiment.id === id) ||
      (trialJobs.has(e.job) && (type === "state" || type === "model" || type === "deleted")),
    (type, e) => {
      if (type === "experiment_deleted" && e.experiment && e.experiment.id === id) {
        location.hash = "#/experiments";
        return;
      }
      // A trial's new evaluations go straight onto the curves.
      if (type !== "progress" || !trialJobs.has(e.job) || !metrics.has(e.job)) return;
      const points = (e.metrics || []).filter((p) => p.test_accuracy !== undefined);
      if (points.length === 0) return;
      metrics.get(e.job).push(...points);
      redraw();
    },
  );
  return () => {
    stop();
    for (const c of [curves, best, scatter]) if (c) c.destroy();
  };
}
