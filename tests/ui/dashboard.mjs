// The dashboard in a real headless browser (Debian's chromium, driven by playwright-core from
// ui/node_modules), against a real weftd with a real job training. Run by dashboard_test, which
// starts weftd and the job and passes, in the environment:
//   WEFT_URL          weftd's REST address, e.g. http://127.0.0.1:PORT
//   WEFT_TOKEN        a tenant token; WEFT_JOB a job of that tenant that is training now
//   WEFT_EXPERIMENT   an experiment of that tenant (optional): its page is checked too
//   WEFT_ADMIN_TOKEN  the admin token (the shares page)
//   WEFT_ARTIFACTS    where the screenshots go
//   CHROMIUM          the browser (default /usr/bin/chromium)
// Exits 0 when every check passed; otherwise prints what failed and exits 1.
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";

// playwright-core is installed with the dashboard's packages (ui/package.json).
const { chromium } = createRequire(new URL("../../ui/package.json", import.meta.url))("playwright-core");

const url = process.env.WEFT_URL;
const token = process.env.WEFT_TOKEN;
const job = process.env.WEFT_JOB;
const admin = process.env.WEFT_ADMIN_TOKEN;
const experiment = process.env.WEFT_EXPERIMENT;
const artifacts = process.env.WEFT_ARTIFACTS || ".";
mkdirSync(artifacts, { recursive: true });

function check(ok, what) {
  if (!ok) throw new Error("check failed: " + what);
  console.log("ok: " + what);
}

async function points(page, chart) {
  return Number((await page.getAttribute("#" + chart, "data-points")) || 0);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  // root in CI: chromium's own sandbox needs an unprivileged user
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
const problems = [];
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  // A CSP violation, a script error or a failed load shows up as a console error.
  page.on("console", (m) => m.type() === "error" && problems.push("console: " + m.text()));
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  // Which request an error status came from (the console names only the status).
  page.on("response", (r) => r.status() >= 400 && problems.push("answer " + r.status() + ": " + r.url()));
  // GET /v1/events requests: the pages share one stream (a tenant has few places for streams).
  let eventStreams = 0;
  page.on("request", (r) => new URL(r.url()).pathname === "/v1/events" && eventStreams++);

  const first = await page.goto(url + "/ui/");
  const csp = first.headers()["content-security-policy"] || "";
  check(csp.includes("script-src 'self'") && !csp.includes("unsafe-inline"), "a strict CSP: " + csp);

  // A wrong token gets the sign-in error and stays out.
  await page.fill("#token", "weft_not-a-token");
  await page.click("#sign-in-form button");
  await page.waitForSelector("#sign-in-error:not([hidden])");
  const error = await page.textContent("#sign-in-error");
  check(/did not accept/.test(error), "a wrong token gets the sign-in error: " + error);
  check(await page.isHidden("#bar"), "and nothing behind the sign-in");
  await page.screenshot({ path: artifacts + "/sign-in-error.png" });
  // The browser reported the 401 of the rejected token as a failed load; that one is expected.
  problems.length = 0;

  // The tenant's token: the jobs page lists the training job.
  await page.fill("#token", token);
  await page.click("#sign-in-form button");
  await page.waitForSelector(`#jobs tr[data-job="${job}"]`, { timeout: 20000 });
  check(true, "signed in, the jobs page lists " + job);
  check((await page.evaluate(() => sessionStorage.getItem("weft.token"))) === token, "the token is in sessionStorage");
  check((await context.cookies()).length === 0, "and no cookie is set");
  await page.screenshot({ path: artifacts + "/jobs.png" });

  // The job page: the accuracy curve grows while the job trains.
  await page.click(`#jobs tr[data-job="${job}"] a`);
  await page.waitForFunction(() => Number(document.querySelector("#chart-accuracy")?.dataset.points || 0) >= 1, null, {
    timeout: 120000,
  });
  const before = await points(page, "chart-accuracy");
  await page.waitForFunction(
    (n) => Number(document.querySelector("#chart-accuracy")?.dataset.points || 0) > n,
    before,
    { timeout: 120000 },
  );
  const after = await points(page, "chart-accuracy");
  check(after > before, `the accuracy curve grew live from ${before} to ${after} evaluations`);
  check((await points(page, "chart-loss")) > 0, "the loss curve has points");
  check((await page.locator("#chart-accuracy canvas").count()) > 0, "the curves are drawn (uPlot canvas)");
  await page.waitForSelector("#log:not(:empty)", { timeout: 30000 });
  check(true, "the learner's log is tailed");
  await page.screenshot({ path: artifacts + "/job.png" });

  // Halt it and see the state change without reloading.
  await page.click("#halt");
  await page.waitForSelector('#job-state [data-state="HALTED"]', { timeout: 60000 });
  check(true, "halted: the page shows HALTED");
  check(await page.isEnabled("#resume"), "and offers to resume");
  await page.screenshot({ path: artifacts + "/job-halted.png" });

  const streamsBeforeQueue = eventStreams;
  await page.click('nav a[data-page="queue"]');
  await page.waitForSelector("#queue, #queue-empty");
  check(true, "the queue page renders");
  await page.click('nav a[data-page="nodes"]');
  await page.waitForSelector("#nodes tbody tr");
  check(true, "the nodes page lists nodes");
  await page.screenshot({ path: artifacts + "/nodes.png" });

  if (experiment) {
    // The experiment page: its trials, their curves, the best so far and a hyperparameter plot.
    await page.click('nav a[data-page="experiments"]');
    await page.waitForSelector(`#experiments tr[data-id="${experiment}"]`, { timeout: 20000 });
    check(true, "the experiments page lists " + experiment);
    await page.click(`#experiments tr[data-id="${experiment}"] a`);
    await page.waitForSelector("#trials tbody tr", { timeout: 60000 });
    for (const c of ["chart-trials", "chart-best", "chart-hyperparameter"]) {
      await page.waitForFunction((id) => Number(document.querySelector("#" + id)?.dataset.points || 0) >= 1, c, {
        timeout: 180000,
      });
      check(true, `the experiment's ${c} has points`);
    }
    const trials = await page.locator("#trials tbody tr").count();
    check(trials >= 2, `the trials table lists ${trials} trials`);
    await page.screenshot({ path: artifacts + "/experiment.png" });
  }

  const opened = eventStreams - streamsBeforeQueue;
  check(opened <= 1, `the queue, nodes${experiment ? " and experiment" : ""} pages shared one event stream (opened ${opened})`);

  // Signing out forgets the token.
  await page.click("#sign-out");
  await page.waitForSelector("#sign-in:not([hidden])");
  check((await page.evaluate(() => sessionStorage.getItem("weft.token"))) === null, "signed out: the token is gone");

  if (admin) {
    const a = await context.newPage();
    a.on("console", (m) => m.type() === "error" && problems.push("console (admin): " + m.text()));
    await a.goto(url + "/ui/#/shares");
    await a.fill("#token", admin);
    await a.click("#sign-in-form button");
    await a.waitForSelector("#shares tbody tr", { timeout: 20000 });
    const tenants = await a.locator("#shares tbody tr").count();
    check(tenants >= 1, `the admin's shares page lists ${tenants} tenant(s)`);
    await a.screenshot({ path: artifacts + "/shares.png" });
  }
  check(problems.length === 0, "no console errors or CSP violations" + (problems.length ? ": " + problems.join("; ") : ""));
} catch (e) {
  console.error(e.message);
  if (problems.length) console.error(problems.join("\n"));
  process.exitCode = 1;
} finally {
  await browser.close();
}
