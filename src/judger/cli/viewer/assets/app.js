// judger view: the page. Plain JS over the JSON endpoints of judger.cli.viewer.app; in a static report
// (judger score --html) the data is embedded as window.JUDGER_REPORT and nothing is fetched.
"use strict";

const REPORT = window.JUDGER_REPORT || null;
const FIELDS = [
  ["samples", "samples"], ["judged", "judged"], ["failed", "failed"], ["timed_out", "timed out"],
  ["mean_score", "mean score"], ["accuracy", "acc"],
];
const RATES = new Set(["mean_score", "accuracy"]);
const AT_N = [["mean", "mean@N"], ["best", "best@N"], ["maj", "maj@N"], ["pass", "pass@N"]];
const state = { offset: 0, limit: 50, verdict: "", meta: null };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null) node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : plain(String(c))); // control characters shown, never acting
  }
  return node;
}

// rates (score, accuracy, @N) always with four decimals, so 1 reads 1.0000 beside 0.9575
function rate(v) { return v === null || v === undefined ? "-" : Number(v).toFixed(4); }

function fmt(v) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "number" && !Number.isInteger(v)) return v.toFixed(4);
  return String(v);
}

// model text (richtext.js): its math rendered by KaTeX, each formula clipped to its own box, and
// what KaTeX cannot render left as the text it is
function formula(value) { return formulaCell(el("span", { class: "tex" }), value); }

function text(value, cls) { return textCell(el("div", { class: cls || "text" }), value); }

async function api(path) {
  const r = await fetch(path);
  if (r.status === 409) { // the file changed since it was indexed: said, and nothing of it shown
    const detail = (await r.json()).detail;
    showChanged([detail]);
    throw new Error(detail);
  }
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

function showChanged(messages) {
  const box = document.getElementById("changed");
  box.hidden = messages.length === 0;
  box.replaceChildren(...messages.map((m) => el("div", {}, m)));
}

// --- summary --------------------------------------------------------------------------------------

function summaryTable(summary) {
  const head = el("tr", {}, el("th", {}, "data_source"), ...FIELDS.map(([, n]) => el("th", {}, n)),
    el("th", {}, "N"), ...AT_N.map(([, n]) => el("th", {}, n)));
  const body = el("tbody");
  for (const [name, row] of Object.entries(summary.data_sources)) {
    const at = row.at_n || {};
    const cells = FIELDS.map(([k]) => el("td", { class: "num", "data-source": name, "data-field": k, "data-value": JSON.stringify(row[k]) }, RATES.has(k) ? rate(row[k]) : fmt(row[k])));
    const atCells = AT_N.map(([k]) => el("td", { class: "num", "data-source": name, "data-field": "at_n." + k, "data-value": JSON.stringify(at[k] ?? null) }, rate(at[k])));
    body.append(el("tr", {}, el("td", {}, name), ...cells, el("td", { class: "num" }, fmt(at.n)), ...atCells));
  }
  return el("table", { class: "grid", id: "summary-table" }, el("thead", {}, head), body);
}

function plot(title, opts, data, width) {
  const box = el("div", { class: "plot" }, el("h4", {}, title));
  const target = el("div");
  box.append(target);
  if (window.uPlot && data[0].length) {
    new uPlot(Object.assign({ width: width || 380, height: 220, legend: { show: false } }, opts), data, target);
  } else {
    target.append(el("p", { class: "hint" }, "no data"));
  }
  return box;
}

function plots(name, p) {
  const box = el("div", { class: "plots", "data-source": name });
  const h = p.histogram;
  const mids = h.edges.slice(0, -1).map((e, i) => (e + h.edges[i + 1]) / 2);
  box.append(plot("score distribution", {
    scales: { x: { time: false } },
    series: [{}, { label: "samples", stroke: "#1f6feb", fill: "rgba(31,111,235,.3)", points: { show: false }, paths: uPlot.paths.bars({ size: [0.9] }) }],
  }, [mids, h.counts]));
  box.append(plot("pass@k against k", {
    scales: { x: { time: false }, y: { range: [0, 1] } },
    series: [{}, { label: "pass@k", stroke: "#1a7f37", points: { show: true } }],
  }, [p.pass_at_k.k, p.pass_at_k.value]));
  const order = p.length_vs_score.length.map((_, i) => i).sort((a, b) => p.length_vs_score.length[a] - p.length_vs_score.length[b]);
  box.append(plot("response length (chars) against score", {
    scales: { x: { time: false } },
    series: [{}, { label: "score", stroke: "#cf222e", paths: () => null, points: { show: true, size: 4 } }],
  }, [order.map((i) => p.length_vs_score.length[i]), order.map((i) => p.length_vs_score.score[i])]));
  return box;
}

function renderSummary(root, payload) {
  const s = payload.summary;
  root.replaceChildren(
    el("p", { id: "totals" }, `${s.samples} samples, ${s.judged} judged, ${s.failed} failed, ${s.timed_out} timed out, ${s.skipped} skipped, ${s.bad_rows} unreadable rows`),
    summaryTable(s),
  );
  if (s.bad_row_errors && s.bad_row_errors.length) {
    // the first rows' errors are kept, and how many rows in all
    const shown = s.bad_row_errors.length < s.bad_rows ? `the first ${s.bad_row_errors.length} of ` : "";
    root.append(el("details", { id: "bad-rows" }, el("summary", {}, `${shown}${s.bad_rows} rows could not be read`),
      el("ul", {}, ...s.bad_row_errors.map((e) => el("li", {}, `row ${e.row}: ${e.message}`)))));
  }
  for (const [name, reasons] of Object.entries(payload.failure_reasons || {})) {
    root.append(el("h3", {}, `top failure reasons: ${name}`),
      el("ul", { class: "reasons" }, ...reasons.map((r) => el("li", {}, `${r.count} × ${r.reason}`))));
  }
  for (const [name, p] of Object.entries(payload.plots || {})) {
    root.append(el("h3", {}, name), plots(name, p));
  }
}

// --- samples ---------------------------------------------------------------------------------------

// how the generation ended (rows of judger eval): a response cut at max_tokens is no finished answer
function finishCell(it) {
  return el("td", { "data-finish": it.finish || "-" }, it.finish || "-", it.truncated ? el("span", { class: "trunc" }, " truncated") : null);
}

function verdictCell(v) { return el("td", { class: "v-" + v, "data-verdict": v }, v.replace("_", " ")); }

function query() {
  const form = document.getElementById("filters");
  const params = new URLSearchParams();
  for (const name of ["source", "min_score", "max_score", "q", "truncated", "sort"]) {
    const v = form.elements[name].value;
    if (v !== "") params.set(name, v);
  }
  if (state.verdict) params.set("verdict", state.verdict);
  params.set("offset", state.offset);
  params.set("limit", state.limit);
  return params;
}

async function loadSamples() {
  const data = await api("api/samples?" + query());
  const verdicts = document.getElementById("verdicts");
  const all = Object.values(data.counts).reduce((a, b) => a + b, 0);
  verdicts.replaceChildren(
    el("button", { type: "button", "data-verdict": "", class: state.verdict === "" ? "active" : "", onclick: () => setVerdict("") }, `all (${all})`),
    ...Object.entries(data.counts).map(([v, n]) => el("button", { type: "button", "data-verdict": v, class: state.verdict === v ? "active" : "", onclick: () => setVerdict(v) }, `${v.replace("_", " ")} (${n})`)),
  );
  document.getElementById("sample-count").textContent = `${data.total} samples match`;
  document.getElementById("sample-count").dataset.total = data.total;
  const body = document.querySelector("#sample-table tbody");
  body.replaceChildren(...data.items.map((it) => el("tr", { class: "click", "data-id": it.id, onclick: () => showGroup(it.id) },
    el("td", { class: "num" }, it.row + (it.response_index ? "." + it.response_index : "")), el("td", {}, it.data_source), verdictCell(it.verdict),
    el("td", { class: "num" }, fmt(it.score)), el("td", {}, formula(it.pred)), el("td", { class: "num" }, it.length),
    finishCell(it), el("td", {}, text(it.prompt)), el("td", {}, text(it.response)))));
  const cut = document.querySelector("#filters select[name=truncated] option[value=true]");
  cut.textContent = `truncated (${data.truncated})`;
  document.getElementById("page").textContent = data.total ? `${data.offset + 1}-${data.offset + data.items.length} of ${data.total}` : "none";
  document.getElementById("prev").disabled = state.offset === 0;
  document.getElementById("next").disabled = state.offset + state.limit >= data.total;
}

function setVerdict(v) { state.verdict = v; state.offset = 0; loadSamples(); }

// --- group and diff ---------------------------------------------------------------------------------

function card(s, label) {
  return el("div", { class: "card", "data-id": s.id },
    el("h4", {}, label || `row ${s.row}${s.response_index ? "." + s.response_index : ""} `, el("span", { class: "v-" + s.verdict }, s.verdict)),
    el("div", { class: "meta" }, `score ${fmt(s.score)} · acc ${fmt(s.acc)} · ${s.length} chars` + (s.finish ? ` · finish ${s.finish}` : "") + " · ",
      s.truncated ? el("span", { class: "trunc" }, "truncated · ") : null, "extracted: ", el("span", { class: "pred" }, formula(s.pred))),
    s.reason ? el("div", { class: "reason" }, "failure: " + s.reason) : null,
    text(s.response, "response"));
}

// an example of the static report: the card with its prompt and gold answer above the response
function reportCard(s) {
  const c = card(s, `${s.data_source} #${s.row} `);
  c.querySelector(".meta").after(
    el("div", { class: "prompt" }, text(s.prompt)),
    el("div", { class: "meta" }, el("b", {}, "gold: "), formula(s.ground_truth)));
  return c;
}

function promptBlock(messages) {
  const box = el("div", { class: "prompt" });
  for (const m of messages || []) box.append(el("b", {}, m.role + ": "), text(typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
  return box;
}

async function showGroup(id, file) {
  const g = await api(`api/group/${id}?file=${file || 0}`);
  const root = document.getElementById("group");
  root.replaceChildren(
    el("h3", {}, `${g.data_source}: ${g.right} of ${g.n} right`),
    promptBlock(g.messages),
    el("p", {}, el("b", {}, "gold: "), formula(g.ground_truth)),
    el("div", { class: "cards", id: "group-cards" }, ...g.samples.map((s) => card(s))));
  tab("group");
}

async function loadDiff(offset) {
  const d = await api(`api/diff?offset=${offset || 0}&limit=100`);
  const root = document.getElementById("diff");
  const files = state.meta.files;
  root.replaceChildren(
    el("p", { id: "diff-total", "data-total": d.total }, `${d.total} samples in ${d.prompts} prompts change verdict from ${files[0].path} (A) to ${files[1].path} (B): ` +
      Object.entries(d.flips).map(([k, n]) => `${k} ${n}`).join(", ")),
    el("table", { class: "grid", id: "diff-table" },
      // the extracted answers as written: a verdict that flips on the same text is the grader's doing
      el("thead", {}, el("tr", {}, el("th", {}, "row"), el("th", {}, "prompt"), el("th", {}, "A"), el("th", {}, "A pred"), el("th", {}, "B"), el("th", {}, "B pred"))),
      el("tbody", {}, ...d.items.map(({ a, b }) => el("tr", { class: "click", onclick: () => showPair(a.id, b.id) },
        el("td", { class: "num" }, a.row), el("td", {}, text(a.prompt)), verdictCell(a.verdict), el("td", {}, el("code", {}, a.pred ?? "-")), verdictCell(b.verdict), el("td", {}, el("code", {}, b.pred ?? "-")))))));
}

async function showPair(a, b) {
  const [sa, sb] = await Promise.all([api(`api/sample/${a}?file=0`), api(`api/sample/${b}?file=1`)]);
  document.getElementById("group").replaceChildren(
    el("h3", {}, "the same sample in both files"), promptBlock(sa.messages),
    el("p", {}, el("b", {}, "gold: "), formula(sa.ground_truth)),
    el("div", { class: "cards" }, card(sa, "A "), card(sb, "B ")));
  tab("group");
}

// --- tabs and start ---------------------------------------------------------------------------------

function tab(name) {
  for (const b of document.querySelectorAll("nav button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== name;
  window.scrollTo(0, 0);
}

// --- indexing: the page is shown from the first rows while the whole file is indexed ---------------

const PHASES = {
  starting: () => "starting",
  whole: () => "starting to index the whole file",
  reading: (f) => `${f.count.toLocaleString()} rows read` + (f.done ? `, ${f.done.toLocaleString()} samples scored on the way in` : ""),
  scoring: (f) => `${f.count.toLocaleString()} rows read, scoring them (${f.done.toLocaleString()} samples scored)`,
  summarising: (f) => `summarising ${f.count.toLocaleString()} samples`,
  saved: () => "loading the index",
};

function showIndexing(meta) {
  const box = document.getElementById("indexing");
  const busy = meta.files.filter((f) => !f.complete);
  box.hidden = busy.length === 0;
  box.classList.toggle("reason", busy.some((f) => f.error));
  box.replaceChildren(...busy.map((f) => el("div", { "data-phase": f.phase },
    f.error ? `indexing failed: ${f.error}` : `indexing ${f.path}: ${(PHASES[f.phase] || (() => f.phase))(f)}, ${f.elapsed_s} s; ` +
      (f.samples ? `shown meanwhile: the first ${f.samples.toLocaleString()} samples (those not scored yet count as skipped)` : "reading the first rows"))));
  showChanged([
    ...meta.files.filter((f) => f.changed).map((f) =>
      `${f.path} was changed on disk since it was indexed: what is shown is the file as it was; run judger view again to see it as it is now`),
    ...meta.files.filter((f) => f.grown).map((f) =>
      `${f.path} has grown since it was indexed: the rows added since are not shown; run judger view again to see them`),
  ]);
  document.getElementById("files").textContent = meta.files.map((f) => `${f.path} (${f.samples} samples${f.complete ? "" : " so far"})`).join(" vs ");
  const select = document.querySelector("#filters select[name=source]");
  const chosen = select.value;
  // asked again every few seconds: an unchanged list is left as it is (an open list stays open)
  if (select.dataset.sources === JSON.stringify(meta.data_sources)) return;
  select.dataset.sources = JSON.stringify(meta.data_sources);
  select.replaceChildren(el("option", { value: "" }, "all"), ...meta.data_sources.map((s) => el("option", { value: s }, s)));
  select.value = meta.data_sources.includes(chosen) ? chosen : "";
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

// the summary and the first page, as far as the files are indexed (a 503 until the first rows are)
async function render(meta) {
  for (;;) {
    try {
      renderSummary(document.getElementById("summary"), await api("api/summary"));
      await loadSamples();
      break;
    } catch (e) {
      if (!String(e).includes(": 503 ")) throw e;
      await sleep(200);
    }
  }
  if (meta.complete && meta.diff) {
    document.querySelector("nav button[data-tab=diff]").hidden = false;
    await loadDiff(0);
  }
}

async function start() {
  if (REPORT) {
    renderSummary(document.getElementById("summary"), REPORT);
    document.getElementById("examples").replaceChildren(...REPORT.examples.map(reportCard));
    document.body.dataset.ready = "1";
    return;
  }
  for (const b of document.querySelectorAll("nav button")) b.addEventListener("click", () => tab(b.dataset.tab));
  const form = document.getElementById("filters");
  let timer = null;
  const reload = () => { clearTimeout(timer); timer = setTimeout(() => { state.offset = 0; loadSamples(); }, 200); };
  form.addEventListener("input", reload);
  form.addEventListener("change", reload);
  document.getElementById("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); loadSamples(); });
  document.getElementById("next").addEventListener("click", () => { state.offset += state.limit; loadSamples(); });
  let meta = (state.meta = await api("api/meta"));
  showIndexing(meta);
  await render(meta);
  // what was rendered is at least as far as this: the banner says so at once
  meta = state.meta = await api("api/meta");
  showIndexing(meta);
  let shown = meta.files.map((f) => f.samples).join();
  while (!meta.complete) {
    if (meta.files.some((f) => f.error)) { document.body.dataset.ready = "failed"; return; }
    await sleep(500);
    meta = state.meta = await api("api/meta");
    showIndexing(meta);
    const now = meta.files.map((f) => f.samples).join();
    if (meta.complete || now !== shown) await render(meta);
    shown = now;
  }
  document.body.dataset.ready = "1";
  // the file may be written or replaced while it is viewed: the page says so within seconds
  for (;;) {
    await sleep(3000);
    showIndexing(state.meta = await api("api/meta"));
  }
}

start().catch((e) => { console.error(e); document.body.append(el("pre", { class: "reason" }, String(e))); });
