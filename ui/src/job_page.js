// One job: its state and history, live loss, accuracy and throughput curves, its targets, the
// delivered and final models, a live log tail per learner, and halt / resume / delete. The page
// follows GET /v1/jobs/{id}/events (a snapshot, then the job's events until it settles) and the
// metric series it reads once from GET /v1/jobs/{id}/metrics.
import { api, download, readText, subscribe } from "./api.js";
import { chart } from "./chart.js";
import { ago, bar, el, fill, percent, stateBadge, throttle } from "./dom.js";

const SETTLED = ["COMPLETED", "FAILED", "HALTED"];
// The log lines the tail keeps, and the metric points read at most (pages of 1,000).
const LOG_LINES = 400;
const MAX_POINTS = 50000;

export function jobPage(main, ctx, id) {
  let closed = false;
  let detail = null;
  let stream = null;
  let logAbort = null;
  let logLive = false; // a followed log is open
  let logRank = 0;
  let logLines = [];
  const points = new Map(); // "t:STEP" training point, "e:STEP" evaluation

  const title = el("h1", {}, id);
  const summary = el("div", { class: "summary" });
  const problem = el("div");
  const actions = el("div", { class: "actions" });
  const targets = el("div", { class: "targets" });
  const learners = el("div");
  const history = el("div");
  const lossNode = el("div", { id: "chart-loss", class: "chart" });
  const accuracyNode = el("div", { id: "chart-accuracy", class: "chart" });
  const speedNode = el("div", { id: "chart-throughput", class: "chart" });
  const rankSelect = el("select", { id: "log-rank", "aria-label": "learner" });
  const logNode = el("pre", { id: "log", class: "log" });
  const message = el("p", { id: "action-message", class: "muted", role: "status" });
  fill(
    main,
    el("p", {}, el("a", { href: "#/jobs" }, "← jobs")),
    title,
    summary,
    actions,
    message,
    problem,
    el("section", { class: "charts" }, lossNode, accuracyNode, speedNode),
    el(
      "div",
      { class: "columns" },
      el("section", {}, el("h2", {}, "Targets"), targets),
      el("section", {}, el("h2", {}, "Learners"), learners),
    ),
    el("section", {}, el("h2", {}, "History"), history),
    el("section", {}, el("h2", {}, "Log ", rankSelect), logNode),
  );

  const loss = chart(lossNode, "Loss", [
    { label: "train loss", stroke: "#1f77b4" },
    { label: "test loss", stroke: "#d62728" },
  ]);
  const accuracy = chart(accuracyNode, "Test accuracy", [
    { label: "test accuracy", stroke: "#2ca02c" },
    { label: "deliver target", stroke: "#999", dash: [6, 4] },
    { label: "complete target", stroke: "#555", dash: [2, 4] },
  ]);
  const speed = chart(speedNode, "Throughput (samples/s)", [{ label: "samples/s", stroke: "#9467bd" }]);

  const drawCharts = throttle(() => {
    if (closed) return;
    const all = [...points.values()].sort((a, b) => a.step - b.step);
    const train = all.filter((p) => p.test_accuracy === undefined);
    const evals = all.filter((p) => p.test_accuracy !== undefined);
    const steps = [...new Set(all.map((p) => p.step))].sort((a, b) => a - b);
    const trainAt = new Map(train.map((p) => [p.step, p]));
    const evalAt = new Map(evals.map((p) => [p.step, p]));
    loss.update(
      steps,
      steps.map((s) => (trainAt.has(s) ? trainAt.get(s).train_loss : null)),
      steps.map((s) =>
        evalAt.has(s) && evalAt.get(s).test_loss !== undefined ? evalAt.get(s).test_loss : null,
      ),
    );
    const t = (detail && detail.targets) || {};
    accuracy.update(
      evals.map((p) => p.step),
      evals.map((p) => p.test_accuracy),
      evals.map(() => (t.deliver ? t.deliver.value : null)),
      evals.map(() => (t.complete ? t.complete.value : null)),
    );
    speed.update(
      train.map((p) => p.step),
      train.map((p) => p.samples_per_s),
    );
  }, 500);

  const addPoints = (list) => {
    for (const p of list || []) {
      points.set((p.test_accuracy === undefined ? "t:" : "e:") + p.step, p);
    }
    drawCharts();
  };

  const loadSeries = async () => {
    try {
      let from = 0;
      while (from !== undefined && points.size < MAX_POINTS) {
        const page = await api("/v1/jobs/" + encodeURIComponent(id) + "/metrics?limit=1000&from=" + from);
        if (closed) return;
        addPoints(page.points);
        from = page.next;
      }
    } catch (e) {
      if (!closed) fill(problem, el("p", { class: "error" }, "metrics: " + e.message));
    }
  };

  const act = async (what, method, path) => {
    fill(message, what + "…");
    try {
      await api(path, method);
      fill(message, what + ": done");
      if (what === "delete") {
        location.hash = "#/jobs";
        return;
      }
      await refresh();
      if (!SETTLED.includes(detail.state)) follow();
    } catch (e) {
      fill(message, el("span", { class: "error" }, what + ": " + e.message));
    }
  };

  const renderActions = () => {
    const s = detail.state;
    const base = "/v1/jobs/" + encodeURIComponent(id);
    const models = detail.models || {};
    const button = (bid, label, enabled, onclick, kind = "") =>
      el("button", { id: bid, type: "button", class: kind, disabled: !enabled, onclick }, label);
    const save = (kind) => async () => {
      fill(message, "downloading the " + kind + " model…");
      try {
        await download(models[kind].download, id + "-" + kind + ".pt");
        fill(message, "downloaded the " + kind + " model (TorchScript; torch.jit.load runs it)");
      } catch (e) {
        fill(message, el("span", { class: "error" }, e.message));
      }
    };
    fill(
      actions,
      button("halt", "Halt", !SETTLED.includes(s), () => act("halt", "POST", base + "/halt")),
      button("resume", "Resume", s === "HALTED", () => act("resume", "POST", base + "/resume")),
      button(
        "delete",
        "Delete",
        true,
        () => {
          if (confirm("Delete job " + id + " with its checkpoints, logs and models?"))
            act("delete", "DELETE", base);
        },
        "danger",
      ),
      button("download-delivered", "Delivered model", !!models.delivered, save("delivered")),
      button("download-final", "Final model", !!models.final, save("final")),
    );
  };

  const render = () => {
    if (!detail) return;
    const d = detail;
    fill(title, d.name + " ", el("span", { class: "muted small" }, d.id));
    const m = d.metrics || {};
    fill(
      summary,
      el("span", { id: "job-state" }, stateBadge(d.state)),
      " ",
      el("span", { class: "reason" }, d.waiting_reason || d.reason),
      el(
        "dl",
        {},
        ctx.admin ? [el("dt", {}, "tenant"), el("dd", {}, d.tenant)] : null,
        el("dt", {}, "progress"),
        el(
          "dd",
          {},
          bar(
            d.progress.fraction,
            "epoch " +
              d.progress.epoch +
              "/" +
              d.progress.epochs_total +
              " · step " +
              d.progress.step +
              "/" +
              d.progress.steps_total,
          ),
        ),
        el("dt", {}, "train loss"),
        el("dd", {}, m.train_loss !== undefined ? m.train_loss.toFixed(4) : "–"),
        el("dt", {}, "test accuracy"),
        el(
          "dd",
          { id: "test-accuracy" },
          percent(m.test_accuracy, 2),
          m.best_test_accuracy !== undefined ? " (best " + percent(m.best_test_accuracy, 2) + ")" : "",
        ),
        el("dt", {}, "throughput"),
        el("dd", {}, m.samples_per_s !== undefined ? Math.round(m.samples_per_s) + " samples/s" : "–"),
        el("dt", {}, "attempt"),
        el("dd", {}, String(d.attempt)),
        el("dt", {}, "submitted"),
        el("dd", { title: d.created_at }, ago(d.created_at)),
      ),
    );
    renderActions();
    const t = d.targets || {};
    const tier = (name, x) =>
      x
        ? el(
            "li",
            { "data-target": name },
            name + " at " + percent(x.value) + ": ",
            x.met ? el("strong", {}, "met " + ago(x.met_at)) : "not yet",
          )
        : null;
    fill(
      targets,
      t.deliver || t.complete
        ? el("ul", {}, tier("deliver", t.deliver), tier("complete", t.complete))
        : el("p", { class: "muted" }, "no targets"),
    );
    fill(
      learners,
      d.learners.length === 0
        ? el("p", { class: "muted" }, "holds no learners now")
        : el(
            "table",
            { class: "grid" },
            el("thead", {}, el("tr", {}, el("th", {}, "rank"), el("th", {}, "node"), el("th", {}, "pid"))),
            el(
              "tbody",
              {},
              d.learners.map((l) =>
                el(
                  "tr",
                  {},
                  el("td", {}, String(l.rank)),
                  el("td", {}, l.node),
                  el("td", {}, l.pid === null ? "–" : String(l.pid)),
                ),
              ),
            ),
          ),
    );
    fill(
      history,
      el(
        "table",
        { id: "history", class: "grid" },
        el(
          "thead",
          {},
          el(
            "tr",
            {},
            ["time", "from", "to", "reason"].map((h) => el("th", {}, h)),
          ),
        ),
        el(
          "tbody",
          {},
          [...d.history]
            .reverse()
            .map((h) =>
              el(
                "tr",
                {},
                el("td", { title: h.time }, ago(h.time)),
                el("td", {}, h.from || "–"),
                el("td", {}, stateBadge(h.to)),
                el("td", {}, h.reason),
              ),
            ),
        ),
      ),
    );
    const world = Math.max(
      1,
      (d.spec && d.spec.resources && Number(d.spec.resources.learners)) || d.learners.length || 1,
    );
    if (rankSelect.options.length !== world) {
      fill(
        rankSelect,
        Array.from({ length: world }, (_, r) => el("option", { value: r }, "rank " + r)),
      );
      rankSelect.value = String(logRank);
    }
    drawCharts();
  };

  const refresh = async () => {
    const d = await api("/v1/jobs/" + encodeURIComponent(id));
    if (closed) return;
    detail = d;
    render();
  };

  // The log of the chosen learner: followed while the job runs, read once when it has settled.
  const showLog = throttle(() => {
    if (!closed) logNode.textContent = logLines.join("\n");
    logNode.scrollTop = logNode.scrollHeight;
  }, 300);
  const tailLog = () => {
    if (logAbort) logAbort.abort();
    logAbort = new AbortController();
    logLines = [];
    let partial = "";
    const settled = detail && SETTLED.includes(detail.state);
    logLive = !settled;
    const path =
      "/v1/jobs/" + encodeURIComponent(id) + "/logs?rank=" + logRank + (settled ? "" : "&follow=true");
    readText(
      path,
      (text) => {
        const lines = (partial + text).split("\n");
        partial = lines.pop();
        logLines.push(...lines);
        if (logLines.length > LOG_LINES) logLines = logLines.slice(-LOG_LINES);
        showLog();
      },
      logAbort.signal,
    )
      .then(() => {
        logLive = false;
      })
      .catch((e) => {
        if (e.name !== "AbortError") logLive = false;
        if (e.name !== "AbortError" && !closed) {
          logLines.push("(log: " + e.message + ")");
          showLog();
        }
      });
  };
  rankSelect.addEventListener("change", () => {
    logRank = Number(rankSelect.value);
    logLive = false;
    tailLog();
  });

  let seriesLoaded = false;
  const follow = () => {
    if (stream) stream.close();
    stream = subscribe("/v1/jobs/" + encodeURIComponent(id) + "/events", {
      onStatus: ctx.setLive,
      reconnect: () => !closed && detail && !SETTLED.includes(detail.state),
      onEvent: (type, e) => {
        if (closed) return;
        if (type === "job") {
          detail = e;
          render();
          if (!seriesLoaded) {
            seriesLoaded = true;
            loadSeries();
          }
          if (!logLive) tailLog();
        } else if (type === "progress" && detail) {
          detail.progress = e.progress;
          detail.best_test_accuracy = e.best_test_accuracy;
          const m = (detail.metrics = detail.metrics || {});
          for (const p of e.metrics || []) {
            if (p.test_accuracy !== undefined) m.test_accuracy = p.test_accuracy;
            else Object.assign(m, { train_loss: p.train_loss, samples_per_s: p.samples_per_s });
          }
          if (e.best_test_accuracy !== null) m.best_test_accuracy = e.best_test_accuracy;
          addPoints(e.metrics);
          render();
        } else if (type === "deleted") {
          fill(summary, stateBadge("DELETED"), " the job was deleted");
          fill(actions);
        } else if (type === "state" || type === "model") {
          if (detail && type === "state") detail.state = e.state; // before the stream ends
          refresh().catch(() => {});
        }
      },
    });
  };
  follow();

  const onResize = throttle(() => [loss, accuracy, speed].forEach((c) => c.resize()), 200);
  window.addEventListener("resize", onResize);
  return () => {
    closed = true;
    window.removeEventListener("resize", onResize);
    if (stream) stream.close();
    if (logAbort) logAbort.abort();
    [loss, accuracy, speed].forEach((c) => c.destroy());
  };
}
