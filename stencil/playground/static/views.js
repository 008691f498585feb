// Stencil playground, the views over a run's results: where each value came from (grounding),
// what the constraint did at each token (constraint trace), and the server facts. Loaded before
// app.js, which calls these functions; plain JavaScript, no library.
"use strict";

// ---- grounding view --------------------------------------------------------------------------
function renderGroundingChoices() {
  const select = $("grounding-doc");
  select.replaceChildren(...state.results.map((r, i) => Object.assign(document.createElement("option"), { value: i, textContent: r.name })));
  renderGrounding();
}

function renderGrounding() {
  const r = state.results[Number($("grounding-doc").value) || 0];
  if (!r) return;
  const chars = Array.from(r.document);  // span offsets count code points
  const spans = [...r.spans].sort((a, b) => a.start - b.start || b.end - a.end);
  const pre = $("grounded-doc");
  const parts = [];
  let at = 0;
  for (const s of spans) {
    if (s.start < at) continue;  // overlaps an earlier mark: its field still lists it
    parts.push(document.createTextNode(chars.slice(at, s.start).join("")));
    const mark = Object.assign(document.createElement("mark"), { textContent: chars.slice(s.start, s.end).join("") });
    Object.assign(mark.dataset, { pointer: s.pointer, start: s.start, end: s.end });
    mark.className = s.how;
    mark.title = `${s.pointer} (${s.how})`;
    parts.push(mark);
    at = s.end;
  }
  parts.push(document.createTextNode(chars.slice(at).join("")));
  pre.replaceChildren(...parts);
  const found = new Map(r.spans.map((s) => [s.pointer, s]));
  $("fields").replaceChildren(...leaves(r.value, "").map(([pointer, v]) => {
    const b = Object.assign(document.createElement("button"), { type: "button", textContent: `${pointer}: ${JSON.stringify(v)}` });
    b.dataset.pointer = pointer;
    if (!found.has(pointer)) { b.classList.add("missing"); b.title = "not found in the document"; }
    const li = document.createElement("li");
    li.append(b);
    return li;
  }));
}

function leaves(v, pointer) {
  if (v && typeof v === "object") {
    return Object.entries(v).flatMap(([k, sub]) => leaves(sub, `${pointer}/${String(k).replace(/~/g, "~0").replace(/\//g, "~1")}`));
  }
  return [[pointer, v]];
}

function highlight(pointer, on) {
  for (const el of document.querySelectorAll("#fields button, #grounded-doc mark")) {
    el.classList.toggle("hot", on && el.dataset.pointer === pointer);
  }
  if (on) {
    const mark = document.querySelector(`#grounded-doc mark.hot`);
    if (mark) mark.scrollIntoView({ block: "nearest" });
  }
}

// ---- constraint view -------------------------------------------------------------------------
async function trace() {
  const doc = currentDocuments()[0];
  $("trace-summary").textContent = "tracing…";
  try {
    if (!doc) throw new Error("Paste a document or drop files first.");
    const prepared = await api("/v1/playground/request", runSpec(doc.text, doc.name));
    renderTrace(await api("/v1/playground/trace", prepared.body));
  } catch (e) {
    $("trace-summary").textContent = e.message;
  }
}

function renderTrace(t) {
  const counts = { sampled: 0, forced: 0, closed: 0, free: 0 };
  for (const tok of t.tokens) counts[tok.kind] += 1;
  const ms = (s) => `${(s * 1000).toFixed(1)} ms`;
  $("trace-summary").textContent = `${t.tokens.length} tokens: ${counts.sampled} chosen by the model, ` +
    `${counts.forced} forced by the grammar, ${counts.closed} closed by close_on_length` +
    (counts.free ? `, ${counts.free} unconstrained` : "") +
    `. Mask ${ms(t.mask_seconds)} vs forward ${ms(t.forward_seconds)} over ${t.steps} steps; finish: ${t.finish_reason}.`;
  $("trace-tokens").replaceChildren(...t.tokens.map((tok) => {
    const li = document.createElement("li");
    const shown = tok.text.replace(/ /g, "\u00b7").replace(/\n/g, "\u21b5").replace(/\t/g, "\u2192");
    const span = Object.assign(document.createElement("span"), { className: `tok ${tok.kind}`, textContent: shown });
    Object.assign(span.dataset, { kind: tok.kind, text: tok.text });
    span.title = tok.kind === "sampled" ? `chosen among ${tok.allowed} allowed tokens` : tok.kind === "forced" ? "forced by the grammar (jump-forward)" : tok.kind === "closed" ? "closed by close_on_length" : "unconstrained";
    li.append(span, tok.kind === "sampled" ? `${tok.allowed}` : tok.kind === "forced" ? "forced" : tok.kind);
    return li;
  }));
  $("trace-chart").innerHTML = chart(t.tokens);
}

function chart(tokens) {
  const w = 600, h = 120, n = Math.max(tokens.length, 1), bw = w / n;
  const max = Math.log10(Math.max(2, ...tokens.map((t) => t.allowed || 1)));
  const bars = tokens.map((t, i) => {
    const v = t.kind === "sampled" ? Math.log10(Math.max(1, t.allowed)) : 0;
    const bh = t.kind === "sampled" ? Math.max(2, (v / max) * (h - 14)) : 3;
    return `<rect class="${t.kind}" x="${(i * bw).toFixed(1)}" y="${(h - bh).toFixed(1)}" width="${Math.max(1, bw - 1).toFixed(1)}" height="${bh.toFixed(1)}" fill="${t.kind === "sampled" ? "#4c9a4c" : t.kind === "forced" ? "#5b9bd5" : "#d9534f"}"><title>${t.kind} ${t.allowed ?? ""}</title></rect>`;
  }).join("");
  return `<svg viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" role="img" aria-label="allowed tokens per step, log scale">` +
    `<text x="4" y="12" font-size="10" fill="#57606a">allowed tokens per step (log scale, max ${Math.round(10 ** max).toLocaleString()})</text>${bars}</svg>`;
}

// ---- server facts ---------------------------------------------------------------------------
async function loadFacts() {
  try {
    const data = await api("/v1/playground/facts");
    $("facts").replaceChildren(...data.facts.flatMap(([k, v]) => [
      Object.assign(document.createElement("dt"), { textContent: k }),
      Object.assign(document.createElement("dd"), { textContent: v }),
    ]));
    const v = data.values;
    $("model-line").textContent = `${v.model} · ${v.family} · ${v.context_length.toLocaleString()} tokens of context · ${v.requests_running} running`;
  } catch (e) {
    $("model-line").textContent = e.message;
  }
}
