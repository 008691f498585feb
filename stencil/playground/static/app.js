// Stencil playground: plain JavaScript, no library. Every call goes to this server; an API key
// given to the browser (HTTP Basic, password = key) travels with each request on its own.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { library: [], files: [], results: [], checkTimer: null, checkSeq: 0, factsTimer: null };
const SAMPLE_SCHEMA = {
  type: "object",
  properties: { name: { type: "string" }, age: { type: "integer" } },
  required: ["name", "age"],
};

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const resp = await fetch(path, init);
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(errorText(data, resp.status));
  return data;
}

function errorText(data, status) {
  const e = data && data.error;
  return e ? e.message + (e.param ? ` (param: ${e.param})` : "") : `HTTP ${status}`;
}

// ---- constraint: library, kinds, validation as you type ------------------------------------
function runSpec(documentText, filename) {
  return {
    kind: $("kind").value, spec: $("spec").value, document: documentText || "",
    filename: filename || "document.txt", grounding: $("grounding").checked && $("kind").value === "json",
    max_tokens: Number($("max-tokens").value) || 200,
  };
}

function scheduleCheck() {
  clearTimeout(state.checkTimer);
  setStatus("checking…", "");
  state.checkTimer = setTimeout(checkSpec, 350);
}

async function checkSpec() {
  const seq = ++state.checkSeq;
  const doc = currentDocuments()[0];
  try {
    await api("/v1/playground/check", runSpec(doc ? doc.text : "", doc ? doc.name : ""));
    if (seq === state.checkSeq) setStatus("valid: the server compiled it", "ok");
  } catch (e) {
    if (seq === state.checkSeq) setStatus(e.message, "bad");
  }
}

const SPEC_LABELS = { json: "Schema", regex: "Regular expression", choice: "Choices, one per line", grammar: "Lark grammar" };

function kindChanged() {
  const kind = $("kind").value;
  document.querySelector('label[for="spec"]').textContent = SPEC_LABELS[kind];
  $("grounding").disabled = kind !== "json";
  $("library").disabled = kind !== "json";
}

function setStatus(text, cls) {
  const el = $("spec-status");
  el.textContent = text;
  el.className = cls;
}

async function loadLibrary() {
  const data = await api("/v1/playground/schemas");
  state.library = data.schemas;
  for (const s of data.schemas) {
    const opt = document.createElement("option");
    opt.value = s.name;
    opt.textContent = s.description ? `${s.name}: ${s.description.slice(0, 50)}` : s.name;
    $("library").append(opt);
  }
}

function pickLibrary() {
  const found = state.library.find((s) => s.name === $("library").value);
  if (!found) return;
  $("kind").value = "json";
  kindChanged();
  $("spec").value = JSON.stringify(found.schema, null, 2);
  // library schemas mark their strings x-grounded: they need the document as source text
  if ($("spec").value.includes('"x-grounded"')) $("grounding").checked = true;
  scheduleCheck();
}

// ---- documents ------------------------------------------------------------------------------
function currentDocuments() {
  const docs = state.files.filter((f) => f.text);
  const pasted = $("document").value;
  return pasted.trim() ? [{ name: "pasted.txt", text: pasted }, ...docs] : docs;
}

async function addFiles(fileList) {
  const files = await Promise.all([...fileList].map(async (f) => ({
    name: f.name, data: toBase64(new Uint8Array(await f.arrayBuffer())),
  })));
  if (!files.length) return;
  try {
    const data = await api("/v1/playground/documents", { files });
    state.files.push(...data.documents);
    renderFiles();
  } catch (e) {
    $("run-error").textContent = e.message;
  }
}

function toBase64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function renderFiles() {
  const ul = $("file-list");
  ul.replaceChildren(...state.files.map((f) => {
    const li = document.createElement("li");
    li.textContent = f.error ? `${f.name}: ${f.error}` : `${f.name} (${f.text.length.toLocaleString()} characters)`;
    if (f.error) li.className = "error";
    return li;
  }));
}

// ---- run: stream each document's JSON through /v1/chat/completions (a base model: completions)
async function run() {
  const docs = currentDocuments();
  $("run-error").textContent = "";
  if (!docs.length) { $("run-error").textContent = "Paste a document or drop files first."; return; }
  $("run").disabled = true;
  state.results = [];
  $("results").hidden = true;
  $("output").textContent = "";
  try {
    for (const [i, doc] of docs.entries()) {
      $("run-state").textContent = `running ${i + 1} of ${docs.length}: ${doc.name}`;
      state.results.push(await runOne(doc, docs.length > 1));
    }
    $("run-state").textContent = `done: ${docs.length} document${docs.length > 1 ? "s" : ""}`;
  } catch (e) {
    $("run-error").textContent = e.message;
    $("run-state").textContent = "failed";
  } finally {
    $("run").disabled = false;
    renderResults();
    renderGroundingChoices();
  }
}

async function runOne(doc, many) {
  const prepared = await api("/v1/playground/request", runSpec(doc.text, doc.name));
  const out = $("output");
  if (many) out.append(`${doc.name}\n`);
  const text = await streamChat(prepared.endpoint, prepared.body, (delta) => out.append(delta));
  out.append("\n");
  const result = { name: doc.name, document: prepared.document, text, value: null, spans: [] };
  if ($("kind").value !== "json") return result;
  result.value = JSON.parse(text);
  if (prepared.body.structured_outputs && prepared.body.structured_outputs.source_text !== undefined) {
    result.spans = (await api("/v1/playground/spans", { document: prepared.document, value: result.value })).spans;
  }
  return result;
}

async function streamChat(endpoint, body, onDelta) {
  const resp = await fetch(endpoint, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  if (!resp.ok) throw new Error(errorText(await resp.json().catch(() => ({})), resp.status));
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "", text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
        const chunk = JSON.parse(line.slice(6));
        if (chunk.error) throw new Error(chunk.error.message);
        const choice = chunk.choices && chunk.choices[0];
        const delta = choice && (choice.delta ? choice.delta.content : choice.text);
        if (delta) { text += delta; onDelta(delta); }
      }
    }
  }
  return text;
}

// ---- results table, JSONL and CSV ------------------------------------------------------------
function columns() {
  const keys = [];
  for (const r of state.results) {
    if (r.value && typeof r.value === "object" && !Array.isArray(r.value)) {
      for (const k of Object.keys(r.value)) if (!keys.includes(k)) keys.push(k);
    }
  }
  return keys.length ? keys : ["output"];
}

function cell(r, key) {
  const v = r.value && typeof r.value === "object" && !Array.isArray(r.value) ? r.value[key] : (key === "output" ? (r.value ?? r.text) : undefined);
  if (v === undefined || v === null) return "";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

function renderResults() {
  if (!state.results.length) return;
  const keys = columns();
  const head = document.createElement("tr");
  for (const k of ["file", ...keys]) head.append(Object.assign(document.createElement("th"), { textContent: k, scope: "col" }));
  const rows = state.results.map((r) => {
    const tr = document.createElement("tr");
    tr.append(Object.assign(document.createElement("td"), { textContent: r.name }));
    for (const k of keys) tr.append(Object.assign(document.createElement("td"), { textContent: cell(r, k) }));
    return tr;
  });
  $("results-table").replaceChildren(head, ...rows);
  $("results").hidden = false;
}

function toCSV() {
  const keys = columns();
  const quote = (s) => (/[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  const lines = [["file", ...keys], ...state.results.map((r) => [r.name, ...keys.map((k) => cell(r, k))])];
  return lines.map((l) => l.map(quote).join(",")).join("\r\n") + "\r\n";
}

function toJSONL() {
  return state.results.map((r) => JSON.stringify({ file: r.name, data: r.value ?? r.text })).join("\n") + "\n";
}

function download(name, type, text) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
}

// ---- tabs and keyboard -----------------------------------------------------------------------
function selectTab(tab) {
  for (const t of document.querySelectorAll("[role=tab]")) {
    const on = t === tab;
    t.setAttribute("aria-selected", on);
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute("aria-controls")).hidden = !on;
  }
  tab.focus();
  clearInterval(state.factsTimer);
  if (tab.id === "tab-facts") {
    loadFacts();
    state.factsTimer = setInterval(loadFacts, 3000);  // KV usage and running requests move
  }
}

function wire() {
  $("spec").value = JSON.stringify(SAMPLE_SCHEMA, null, 2);
  $("spec").addEventListener("input", scheduleCheck);
  $("kind").addEventListener("change", () => { kindChanged(); scheduleCheck(); });
  $("grounding").addEventListener("change", scheduleCheck);
  $("library").addEventListener("change", pickLibrary);
  $("run").addEventListener("click", run);
  $("trace").addEventListener("click", trace);
  $("clear-files").addEventListener("click", () => { state.files = []; renderFiles(); });
  $("download-jsonl").addEventListener("click", () => download("results.jsonl", "application/x-ndjson", toJSONL()));
  $("download-csv").addEventListener("click", () => download("results.csv", "text/csv", toCSV()));
  $("grounding-doc").addEventListener("change", renderGrounding);
  const drop = $("drop"), input = $("files");
  drop.addEventListener("click", () => input.click());
  drop.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); input.click(); } });
  input.addEventListener("change", () => { addFiles(input.files); input.value = ""; });
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); addFiles(e.dataTransfer.files); });
  for (const ev of ["mouseover", "focusin"]) {
    for (const id of ["fields", "grounded-doc"]) {
      $(id).addEventListener(ev, (e) => { const p = e.target.dataset && e.target.dataset.pointer; if (p) highlight(p, true); });
    }
  }
  for (const ev of ["mouseout", "focusout"]) {
    for (const id of ["fields", "grounded-doc"]) $(id).addEventListener(ev, () => highlight(null, false));
  }
  const tabs = [...document.querySelectorAll("[role=tab]")];
  for (const t of tabs) {
    t.addEventListener("click", () => selectTab(t));
    t.addEventListener("keydown", (e) => {
      const step = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
      if (step) selectTab(tabs[(tabs.indexOf(t) + step + tabs.length) % tabs.length]);
    });
  }
  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") { e.preventDefault(); run(); }
  });
}

wire();
loadLibrary().catch((e) => setStatus(e.message, "bad"));
loadFacts();
scheduleCheck();
