// The list pages: jobs, queue, nodes and tenants' shares. Each reads its API resource, then
// listens to GET /v1/events (the one stream the pages share, api.js listen) to stay current:
// progress events update a row in place; a state change, a waiting reason or a deletion
// refetches what it changes.
import { api, listen } from "./api.js";
import { ago, bar, duration, el, fill, percent, stateBadge, throttle } from "./dom.js";

const ACTIVE = ["QUEUED", "PLACED", "STARTING", "RUNNING", "DELIVERED", "RESUMING", "PREEMPTED"];
const STATES = ACTIVE.concat(["COMPLETED", "FAILED", "HALTED"]);
// The most jobs the jobs page lists (newest first, pages of 200).
const MAX_JOBS = 1000;

function jobLink(id, text) {
  return el("a", { href: "#/jobs/" + encodeURIComponent(id) }, text || id);
}

function errorBox(err) {
  return el("p", { class: "error", role: "alert" }, err.message || String(err));
}

function progressBar(p) {
  if (!p) return "";
  const label = p.epochs_total
    ? "epoch " + p.epoch + "/" + p.epochs_total + " · " + percent(p.fraction, 0)
    : percent(p.fraction, 0);
  return bar(p.fraction, label);
}

function targetsMet(job) {
  const met = job.targets_met || [];
  if (met.length === 0) return "–";
  return met.join(", ");
}

// The jobs page: every job the token may see, newest first, with filters on state, tenant
// (admin) and name.
export function jobsPage(main, ctx) {
  const jobs = new Map();
  let closed = false;
  const stateFilter = el(
    "select",
    { id: "filter-state", "aria-label": "state" },
    el("option", { value: "active" }, "active"),
    el("option", { value: "" }, "all states"),
    STATES.map((s) => el("option", { value: s }, s)),
  );
  const textFilter = el("input", {
    id: "filter-text",
    type: "search",
    placeholder: ctx.admin ? "name, id or tenant" : "name or id",
    "aria-label": "search",
  });
  const count = el("span", { class: "muted" });
  const body = el("tbody");
  const problem = el("div");
  fill(
    main,
    el("h1", {}, "Jobs"),
    el("div", { class: "filters" }, stateFilter, textFilter, count),
    problem,
    el(
      "table",
      { id: "jobs", class: "grid" },
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          [
            "Job",
            "Name",
            ctx.admin ? "Tenant" : null,
            "State",
            "Progress",
            "Best accuracy",
            "Targets met",
            "Learners",
            "Updated",
          ]
            .filter((h) => h !== null)
            .map((h) => el("th", {}, h)),
        ),
      ),
      body,
    ),
  );

  const render = () => {
    const want = stateFilter.value;
    const text = textFilter.value.trim().toLowerCase();
    const rows = [];
    for (const j of jobs.values()) {
      if (want === "active" && !ACTIVE.includes(j.state)) continue;
      if (want && want !== "active" && j.state !== want) continue;
      if (text && ![j.id, j.name, j.tenant].some((v) => String(v).toLowerCase().includes(text))) continue;
      rows.push(
        el(
          "tr",
          { "data-job": j.id },
          el("td", {}, jobLink(j.id)),
          el("td", {}, j.name),
          ctx.admin ? el("td", {}, j.tenant) : null,
          el(
            "td",
            {},
            stateBadge(j.state),
            j.waiting_reason ? el("div", { class: "muted small" }, j.waiting_reason) : null,
          ),
          el("td", {}, progressBar(j.progress)),
          el("td", {}, percent(j.best_test_accuracy)),
          el("td", {}, targetsMet(j)),
          el("td", {}, String((j.learners || []).length)),
          el("td", { title: j.updated_at }, ago(j.updated_at)),
        ),
      );
    }
    fill(body, rows.length ? rows : el("tr", {}, el("td", { colspan: 9, class: "muted" }, "no jobs match")));
    count.textContent = rows.length + " of " + jobs.size + " jobs";
  };
  stateFilter.addEventListener("change", render);
  textFilter.addEventListener("input", render);

  const load = async () => {
    try {
      const all = new Map();
      let after = "";
      while (all.size < MAX_JOBS) {
        const page = await api("/v1/jobs?limit=200" + (after ? "&after=" + encodeURIComponent(after) : ""));
        for (const j of page.jobs) all.set(j.id, j);
        if (!page.next) break;
        after = page.next;
      }
      if (closed) return;
      jobs.clear();
      for (const [id, j] of all) jobs.set(id, j);
      fill(problem);
      render();
    } catch (e) {
      if (!closed) fill(problem, errorBox(e));
    }
  };
  const reloadOne = async (id) => {
    try {
      const j = await api("/v1/jobs/" + encodeURIComponent(id));
      if (closed) return;
      const known = jobs.has(id);
      jobs.set(id, j);
      if (!known) {
        // a new job goes first: newest first, as the API lists them
        const entries = [[id, j], ...[...jobs].filter(([k]) => k !== id)];
        jobs.clear();
        for (const [k, v] of entries) jobs.set(k, v);
      }
      render();
    } catch (e) {
      if (e.status === 404) {
        jobs.delete(id);
        render();
      }
    }
  };
  const rerender = throttle(() => !closed && render(), 500);
  load();
  const stream = listen({
    onStatus: ctx.setLive,
    onEvent: (type, e) => {
      if (type === "reset") return load();
      if (!e.job) return;
      const j = jobs.get(e.job);
      if (type === "deleted") {
        jobs.delete(e.job);
        return rerender();
      }
      if (type === "progress" && j) {
        j.progress = e.progress;
        j.best_test_accuracy = e.best_test_accuracy;
        j.updated_at = e.time;
        return rerender();
      }
      if (type === "waiting" && j) {
        j.waiting_reason = e.reason;
        return rerender();
      }
      if (type === "state" || type === "model" || !j) reloadOne(e.job);
    },
  });
  const tick = setInterval(rerender, 10000); // the "updated … ago" column
  return () => {
    closed = true;
    clearInterval(tick);
    stream.close();
  };
}

// A page that shows one API resource and reads it again (at most once a second) whenever
// something happens to a job: render(data) gives the page's content.
function livePage(main, ctx, title, path, render) {
  let closed = false;
  const content = el("div");
  fill(main, el("h1", {}, title), content);
  const load = throttle(async () => {
    // A read the throttle held back past the page's end (the token may be gone by then).
    if (closed) return;
    try {
      const data = await api(path);
      if (!closed) fill(content, render(data));
    } catch (e) {
      if (!closed) fill(content, errorBox(e));
    }
  }, 1000);
  load();
  const stream = listen({
    onStatus: ctx.setLive,
    onEvent: (type) => {
      if (type !== "progress") load();
    },
  });
  return () => {
    closed = true;
    stream.close();
  };
}

// A queue entry's next target: "deliver in ~42 s", "deliver: unknown yet", "complete: beyond
// epochs", or "–" when it has none left (GET /v1/queue's next_target).
function nextTarget(next) {
  if (!next) return "–";
  if (next.beyond_budget) return next.target + ": beyond epochs";
  if (next.eta_s === null) return next.target + ": unknown yet";
  return next.target + " in ~" + duration(next.eta_s);
}

// The queue page: waiting jobs in the order the scheduler considers them, each with its reason
// and the estimated training time to its next target.
export function queuePage(main, ctx) {
  return livePage(main, ctx, "Queue", "/v1/queue", (q) => [
    el(
      "p",
      { class: "muted" },
      "last scheduling round " +
        q.round.last_ms.toFixed(1) +
        " ms over " +
        q.round.active_jobs +
        " active jobs (longest " +
        q.round.max_ms.toFixed(1) +
        " ms, " +
        q.round.rounds +
        " rounds)",
    ),
    q.queue.length === 0
      ? el("p", { id: "queue-empty" }, "Nothing is waiting.")
      : el(
          "table",
          { id: "queue", class: "grid" },
          el(
            "thead",
            {},
            el(
              "tr",
              {},
              [
                "#",
                "Job",
                "Name",
                "Tenant",
                "State",
                "Priority",
                "Waiting since",
                "Next target",
                "Why",
              ].map((h) => el("th", {}, h)),
            ),
          ),
          el(
            "tbody",
            {},
            q.queue.map((e) =>
              el(
                "tr",
                { "data-job": e.id },
                el("td", {}, String(e.position)),
                el("td", {}, e.id ? jobLink(e.id) : "(another tenant's)"),
                el("td", {}, e.name || ""),
                el("td", {}, e.tenant),
                el("td", {}, stateBadge(e.state)),
                el("td", {}, String(e.priority)),
                el("td", { title: e.submitted }, ago(e.submitted)),
                el("td", { class: "next-target" }, nextTarget(e.next_target)),
                el("td", {}, el("code", {}, e.code), " ", e.reason),
              ),
            ),
          ),
        ),
  ]);
}

// The nodes page: each node's capacity, what is allocated, and which jobs hold it.
export function nodesPage(main, ctx) {
  return livePage(main, ctx, "Nodes", "/v1/nodes", (n) =>
    el(
      "table",
      { id: "nodes", class: "grid" },
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ["Node", "CPUs", "Memory", "GPUs", "Jobs"].map((h) => el("th", {}, h)),
        ),
      ),
      el(
        "tbody",
        {},
        n.nodes.map((node) => {
          const c = node.capacity;
          const a = node.allocated;
          const use = (used, cap, unit) =>
            cap > 0 ? bar(used / cap, used + " / " + cap + unit) : el("span", { class: "muted" }, "none");
          return el(
            "tr",
            { "data-node": node.name },
            el("td", {}, node.name),
            el("td", {}, use(a.cpus, c.cpus, "")),
            el("td", {}, use(a.memory_mb, c.memory_mb, " MB")),
            el("td", {}, use(a.gpus, c.gpus, "")),
            el(
              "td",
              {},
              node.jobs.map((j) =>
                el("div", {}, jobLink(j.id), " ", stateBadge(j.state), ctx.admin ? " " + j.tenant : ""),
              ),
              node.other_tenants_jobs
                ? el("div", { class: "muted" }, node.other_tenants_jobs + " of other tenants")
                : null,
            ),
          );
        }),
      ),
    ),
  );
}

// The shares page (the admin's): each tenant's dominant share against its weighted fair share.
export function sharesPage(main, ctx) {
  if (!ctx.admin) {
    fill(
      main,
      el("h1", {}, "Shares"),
      el("p", {}, "Tenants' shares are the admin's view; sign in with the admin token to see them."),
    );
    return () => {};
  }
  return livePage(main, ctx, "Tenants' shares", "/v1/tenants", (t) =>
    el(
      "table",
      { id: "shares", class: "grid" },
      el(
        "thead",
        {},
        el(
          "tr",
          {},
          ["Tenant", "Weight", "Dominant share", "Fair share", "Running", "Queued", "CPUs used", "GPU-seconds"].map(
            (h) => el("th", {}, h),
          ),
        ),
      ),
      el(
        "tbody",
        {},
        t.tenants.map((x) => {
          const u = x.usage || {};
          const over = u.dominant_share > u.fair_share + 1e-9;
          return el(
            "tr",
            { "data-tenant": x.name },
            el("td", {}, x.name),
            el("td", {}, String(x.weight)),
            el("td", {}, bar(u.dominant_share, percent(u.dominant_share), over ? "over" : "")),
            el("td", {}, bar(u.fair_share, percent(u.fair_share), "fair")),
            el("td", {}, String(u.running_jobs)),
            el("td", {}, String(u.queued_jobs)),
            el("td", {}, String(u.used ? u.used.cpus : 0)),
            el("td", { class: "gpu-seconds" }, (u.gpu_seconds || 0).toFixed(1)),
          );
        }),
      ),
    ),
  );
}
