// The dashboard's shell: sign-in, the navigation bar and the pages behind #/jobs, #/jobs/{id},
// #/experiments, #/experiments/{id}, #/queue, #/nodes and #/shares. Each page opens one event stream and closes it when left.
import { api, ApiError, setToken, setUnauthorizedHandler, token } from "./api.js";
import { fill } from "./dom.js";
import { jobsPage, nodesPage, queuePage, sharesPage } from "./pages.js";
import { jobPage } from "./job_page.js";
import { experimentPage, experimentsPage } from "./experiment_page.js";

const main = document.getElementById("main");
const bar = document.getElementById("bar");
const signInSection = document.getElementById("sign-in");
const signInError = document.getElementById("sign-in-error");
const live = document.getElementById("live");
let leave = null;
let who = null;

function showSignIn(message) {
  if (leave) leave();
  leave = null;
  fill(main);
  bar.hidden = true;
  signInSection.hidden = false;
  signInError.hidden = !message;
  signInError.textContent = message || "";
  document.getElementById("token").focus();
}

// Whose the token is: GET /v1/whoami.
async function whoAmI() {
  const w = await api("/v1/whoami");
  return { admin: w.admin, label: w.admin ? "admin" : "tenant " + w.tenant };
}

async function signIn(value) {
  setToken(value);
  try {
    who = await whoAmI();
  } catch (e) {
    setToken("");
    who = null;
    showSignIn(
      e instanceof ApiError && e.status === 401
        ? "weftd did not accept this token: " + e.message
        : "cannot reach weftd: " + e.message,
    );
    return;
  }
  signInSection.hidden = true;
  bar.hidden = false;
  document.getElementById("who").textContent = who.label;
  route();
}

function setLive(text) {
  live.textContent = text;
  live.className = "live " + (text === "live" ? "live-on" : "live-off");
}

function route() {
  if (!token() || !who) return;
  if (leave) leave();
  leave = null;
  setLive("");
  const hash = location.hash || "#/jobs";
  const parts = hash.slice(2).split("/").map(decodeURIComponent);
  const page = parts[0] || "jobs";
  for (const a of bar.querySelectorAll("nav a")) {
    a.classList.toggle("current", a.dataset.page === page);
  }
  const ctx = { admin: who.admin, setLive };
  fill(main);
  if (page === "jobs" && parts[1]) leave = jobPage(main, ctx, parts[1]);
  else if (page === "experiments" && parts[1]) leave = experimentPage(main, ctx, parts[1]);
  else if (page === "experiments") leave = experimentsPage(main, ctx);
  else if (page === "queue") leave = queuePage(main, ctx);
  else if (page === "nodes") leave = nodesPage(main, ctx);
  else if (page === "shares") leave = sharesPage(main, ctx);
  else leave = jobsPage(main, ctx);
}

setUnauthorizedHandler((err) => {
  setToken("");
  who = null;
  showSignIn("signed out: " + err.message);
});

document.getElementById("sign-in-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const input = document.getElementById("token");
  const value = input.value.trim();
  input.value = "";
  signIn(value);
});
document.getElementById("sign-out").addEventListener("click", () => {
  setToken("");
  who = null;
  showSignIn("");
});
window.addEventListener("hashchange", route);

if (token()) signIn(token());
else showSignIn("");
