// The trace inspector's page: a list of conversations from the journal and one conversation in
// full. Everything shown is built with textContent, never parsed as HTML: the journal holds what
// clients sent, and none of it may become markup on this page.
"use strict";
(function () {
  const API = "/_emulator/inspector";
  const KEY_STORE = "ptc-emulator-api-key";
  const $ = (id) => document.getElementById(id);
  const state = { selected: null, seqs: "", loading: false, again: false, live: false };

  // ---------------------------------------------------------------- the key and the fragment
  // The key may arrive in the URL fragment (#key=...), which browsers never send to a server;
  // it moves to sessionStorage (this tab only) and leaves the address bar at once.
  function fragment() {
    return new URLSearchParams(location.hash.replace(/^#/, ""));
  }
  function setFragment(params) {
    const text = params.toString();
    history.replaceState(null, "", location.pathname + location.search + (text ? "#" + text : ""));
  }
  function takeKey() {
    const params = fragment();
    if (params.has("key")) {
      sessionStorage.setItem(KEY_STORE, params.get("key"));
      params.delete("key");
      setFragment(params);
    }
  }
  takeKey();
  const key = () => sessionStorage.getItem(KEY_STORE) || "";
  const headers = () => (key() ? { Authorization: "Bearer " + key() } : {});

  class Unauthorised extends Error {}

  // A saved trace (`ptc-emulator` writes one per failed test) carries its conversations in the
  // page itself: the same views, read from that data instead of the server, with no server at all.
  const saved = document.getElementById("ptc-trace");
  const trace = saved ? JSON.parse(saved.textContent) : null;

  function matches(s, query) {
    const status = query.get("status");
    if (query.get("scope") && s.scope !== query.get("scope")) return false;
    if (query.get("scenario") && !s.scenarios.includes(query.get("scenario"))) return false;
    if (query.get("errors") && !s.errors) return false;
    if (!status) return true;
    const codes = s.statuses.map(String);
    if (/^[245]xx$/.test(status)) return codes.some((code) => code[0] === status[0]);
    if (/^\d+$/.test(status)) return codes.includes(status);
    return s.state === status;
  }

  function fromTrace(path) {
    const [where, search] = path.split("?");
    const all = trace.conversations;
    if (where === "/conversations") {
      const query = new URLSearchParams(search || "");
      const rows = all.map((c) => c.summary).filter((s) => matches(s, query));
      const seen = (name) => [...new Set(all.flatMap((c) => name === "scope" ? (c.summary.scope ? [c.summary.scope] : []) : c.summary.scenarios))].sort();
      return { object: "list", data: rows, scopes: seen("scope"), scenarios: seen("scenarios"), latest_seq: 0 };
    }
    const id = decodeURIComponent(where.replace("/conversations/", ""));
    const found = all.find((c) => c.summary.id === id);
    if (!found) throw new Error("No conversation '" + id + "' in this trace.");
    return found;
  }

  async function api(path) {
    if (trace) return fromTrace(path);
    const reply = await fetch(API + path, { headers: headers(), cache: "no-store" });
    if (reply.status === 401) {
      askForKey(true);
      throw new Unauthorised("the emulator wants its API key");
    }
    const body = await reply.json();
    if (!reply.ok) throw new Error((body.error && body.error.message) || "HTTP " + reply.status);
    return body;
  }

  function askForKey(rejected) {
    const dialog = $("key-dialog");
    if (dialog.open) return;
    setLive(false, rejected ? "API key needed" : "offline");
    $("key-input").value = "";
    dialog.showModal();
  }
  $("key-button").addEventListener("click", () => askForKey(false));
  $("key-cancel").addEventListener("click", () => $("key-dialog").close());
  $("key-form").addEventListener("submit", () => {
    const value = $("key-input").value.trim();
    if (value) sessionStorage.setItem(KEY_STORE, value);
    else sessionStorage.removeItem(KEY_STORE);
    refresh();
    listen();
  });

  // ---------------------------------------------------------------- small DOM helpers
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
    }
    return node;
  }
  const badge = (text, cls) => el("span", { class: "badge " + (cls || ""), text });
  const statusBadge = (status) => badge(String(status), "s" + String(status)[0]);
  const time = (at) => (at ? new Date(at * 1000).toLocaleTimeString([], { hour12: false }) : "");
  // JSON for reading: short values on one line, longer ones indented.
  const pretty = (value) => {
    if (typeof value === "string") {
      try { value = JSON.parse(value); } catch (e) { return value; }
    }
    const flat = JSON.stringify(value);
    if (flat !== undefined && flat.length <= 72) return JSON.stringify(value, null, 1).replace(/\n\s*/g, " ");
    return JSON.stringify(value, null, 2);
  };
  const short = (text, n) => (text && text.length > n ? text.slice(0, n - 1) + "\u2026" : text || "");
  const textOf = (content) => {
    if (typeof content === "string") return content;
    if (!Array.isArray(content)) return "";
    return content.map((p) => (p && (p.text || p.refusal)) || "").filter(Boolean).join(" ");
  };

  function setLive(on, label) {
    state.live = on;
    const live = $("live");
    live.className = "live " + (on ? "on" : "off");
    live.textContent = label || (on ? "live" : "offline");
  }

  // ---------------------------------------------------------------- the list
  function filterQuery() {
    const params = new URLSearchParams();
    for (const id of ["f-scope", "f-scenario", "f-status"]) {
      const field = $(id);
      if (field.value) params.set(field.name, field.value);
    }
    if ($("f-errors").checked) params.set("errors", "1");
    return params;
  }

  function fillSelect(select, values, current) {
    const first = select.options[0];
    select.replaceChildren(first);
    const all = new Set(values);
    if (current) all.add(current);
    for (const value of [...all].sort()) select.appendChild(el("option", { value, text: value }));
    select.value = current || "";
  }

  async function refresh() {
    if (state.loading) { state.again = true; return; }
    state.loading = true;
    try {
      do {
        state.again = false;
        await loadList();
      } while (state.again);
    } catch (error) {
      if (!(error instanceof Unauthorised)) $("list-note").textContent = "Could not read the journal: " + error.message;
    } finally {
      state.loading = false;
    }
  }

  async function loadList() {
    const query = filterQuery();
    const body = await api("/conversations?" + query.toString());
    // The filters changed while this list was on its way (a new #scope in the address, as the
    // pytest plugin's links and `browser.get` give): it is stale. Putting its filters back in
    // the fields would pin the page to the old scope, so load again with the new ones instead.
    if (filterQuery().toString() !== query.toString()) { state.again = true; return; }
    fillSelect($("f-scope"), body.scopes, query.get("scope"));
    fillSelect($("f-scenario"), body.scenarios, query.get("scenario"));
    $("list-note").textContent = body.data.length === 0
      ? "No conversations yet" + (query.toString() ? " for these filters." : ": run a request against /v1/responses.")
      : body.data.length + " conversation" + (body.data.length === 1 ? "" : "s") + ", newest first";
    const list = $("conversations");
    list.replaceChildren(...body.data.map(row));
    let selected = body.data.find((c) => c.seqs.includes(state.selected));
    if (!selected && state.selected === null && body.data.length) selected = body.data[0];
    if (selected) {
      const seqs = selected.seqs.join(",");
      if (seqs !== state.seqs || state.selected === null) await show(selected.id, selected.seqs[0]);
      markSelected();
    }
  }

  function row(c) {
    const item = el("li", { "data-id": c.id, "data-seq": String(c.seqs[0]), onclick: () => show(c.id, c.seqs[0]) },
      el("div", { class: "title", title: c.title, text: c.title || "(no input)" }),
      el("div", { class: "meta" },
        badge(c.state, c.state),
        c.errors && c.state !== "failed" ? badge("errors", "error") : null,
        el("span", { text: c.requests + " request" + (c.requests === 1 ? "" : "s") }),
        c.scenarios.length ? el("span", { text: c.scenarios.join(", ") }) : el("span", { text: "no scenario" }),
        el("span", { text: time(c.updated_at) })),
      el("div", { class: "meta" },
        c.scope ? el("span", { class: "mono", text: c.scope }) : null,
        c.links.map((l) => badge(l, "link"))));
    return item;
  }

  function markSelected() {
    for (const li of $("conversations").children) {
      li.classList.toggle("selected", Number(li.dataset.seq) === state.selected);
    }
  }

  $("filters").addEventListener("change", () => {
    const params = fragment();
    const scope = $("f-scope").value;
    if (scope) params.set("scope", scope); else params.delete("scope");
    setFragment(params);
    refresh();
  });

  // ---------------------------------------------------------------- one conversation
  async function show(id, firstSeq) {
    state.selected = firstSeq;
    markSelected();
    let data;
    try {
      data = await api("/conversations/" + encodeURIComponent(id));
    } catch (error) {
      if (!(error instanceof Unauthorised)) $("view").replaceChildren(el("p", { class: "error-text", text: error.message }));
      return;
    }
    state.seqs = data.summary.seqs.join(",");
    const params = fragment();
    params.set("c", id);
    setFragment(params);
    $("view").replaceChildren(...renderConversation(data));
  }

  function renderConversation(data) {
    const s = data.summary;
    const parts = [
      el("section", { class: "conv-head" },
        el("h2", { text: s.title || "(no input)" }),
        el("div", { class: "meta" },
          badge(s.state, s.state),
          s.errors ? badge("errors", "error") : null,
          s.scope ? el("span", { class: "mono", text: "scope " + s.scope }) : null,
          el("span", { text: s.scenarios.length ? "scenario " + s.scenarios.join(", ") : "no scenario matched" }),
          s.links.map((l) => badge(l, "link")),
          el("span", { class: "mono", text: s.id }))),
    ];
    // A failed conversation says why first: the refusal, or the program that did not complete.
    if (s.error) {
      parts.push(el("section", { class: "panel failure", id: "error" }, el("h3", { text: "What failed" }), el("pre", { class: "error-text", text: s.error })));
    }
    if (s.final !== null && s.final !== undefined) {
      // After a failed program (or a refused request) the message answers a failure: painted as one.
      const failed = s.state === "failed";
      parts.push(el("section", { class: "panel", id: "final" },
        el("h3", { text: failed ? "Final message (after the failure)" : "Final message" }),
        el("div", { class: failed ? "final failed" : "final", text: s.final })));
    }
    parts.push(figures(data.figures));
    for (const program of data.programs) parts.push(renderProgram(program));
    const direct = data.calls.filter((c) => c.route !== "program");
    if (direct.length) {
      parts.push(el("section", { class: "panel" }, el("h3", { text: "Direct tool calls" }), callTable(direct)));
    }
    parts.push(el("section", { class: "panel" }, el("h3", { text: "Timeline" }), renderTimeline(data.entries)));
    return parts;
  }

  function figures(f) {
    const fig = (n, k) => el("div", { class: "figure" }, el("div", { class: "n", text: String(n) }), el("div", { class: "k", text: k }));
    const calls = Object.entries(f.calls || {});
    return el("section", { class: "panel", id: "figures" },
      el("h3", { text: "Figures" }),
      el("div", { class: "figures" },
        fig(f.requests || 0, "requests"),
        fig(f.model_turns || 0, "model turns"),
        fig(f.programs || 0, "programs"),
        fig(f.programs_run || 0, "program steps (starts and resumes)"),
        fig(f.program_tool_calls || 0, "calls from programs"),
        fig(f.direct_tool_calls || 0, "direct calls"),
        fig((f.input_tokens || 0) + " / " + (f.output_tokens || 0), "tokens in / out"),
        fig(f.kept_out_bytes || 0, "bytes kept out of context"),
        fig(Math.round(f.latency_ms || 0) + " ms", "latency (sum)"),
        fig(f.retries || 0, "retries")),
      calls.length
        ? el("p", { class: "note" }, "Calls by kind and route: ", calls.map(([k, n]) => k + " \u00d7 " + n).join(", "))
        : null);
  }

  // `failing`: the line (from 1) the program's error names, marked in the code.
  function codeBlock(code, failing) {
    const pre = el("pre", { class: "code" });
    if (typeof code !== "string") code = "";
    pre.appendChild(window.ptcHighlight ? window.ptcHighlight.highlight(code) : el("code", { text: code }));
    const line = failing ? pre.querySelectorAll(".line")[failing - 1] : null;
    if (line) {
      line.classList.add("failing");
      line.title = "the program failed here";
    }
    return pre;
  }

  function renderProgram(p) {
    const failure = p.failure;
    const section = el("section", { class: failure ? "panel program failed" : "panel program" },
      el("h3", {}, "Program", failure ? badge("failed", "failed") : null),
      el("div", { class: "note mono", text: p.call_id + (p.seq ? " \u00b7 written in request #" + p.seq : "") }),
      p.code ? codeBlock(p.code, failure && failure.line) : el("p", { class: "note", text: "(its code is not in the journal)" }),
      failure ? el("pre", { class: "error-text program-error", text: "Ended " + failure.status + (failure.line ? " at line " + failure.line : "") + ": " + failure.message }) : null);
    p.pauses.forEach((pause, i) => {
      section.appendChild(el("div", { class: "pause" },
        el("h4", { text: "Pause " + (i + 1) + " \u2014 response #" + pause.seq + ": " + pause.calls.length + " call" + (pause.calls.length === 1 ? "" : "s") }),
        callTable(pause.calls)));
    });
    if (p.output) {
      section.appendChild(el("div", { class: "pause" },
        el("h4", { class: failure ? "error-text" : null, text: "program_output \u2014 response #" + p.output.seq + " (" + (p.output.status || "") + ")" }),
        el("pre", { class: "mono", text: pretty(p.output.result) })));
    }
    return section;
  }

  function callTable(calls) {
    const body = el("tbody");
    for (const c of calls) {
      const caller = c.caller ? c.caller.type + (c.caller.caller_id ? " " + short(c.caller.caller_id, 18) : "") : "the model";
      const bad = c.violations && c.violations.length;
      const refused = c.output && c.output.refused;
      body.appendChild(el("tr", { class: (bad ? "violation call" : "call") + (refused ? " refused" : ""), "data-call-id": c.call_id },
        el("td", {}, el("strong", { class: "mono", text: c.name || c.type }), el("div", { class: "note mono", text: c.call_id })),
        el("td", {}, el("pre", { text: pretty(c.arguments) })),
        el("td", { class: "mono", text: caller, title: c.caller && c.caller.caller_id ? c.caller.caller_id : null }),
        el("td", {}, badge(c.route, "link")),
        el("td", {},
          c.output ? el("pre", { text: pretty(c.output.output) }) : el("span", { class: "note", text: "no output yet" }),
          refused ? el("div", { class: "error-text", text: "refused: request #" + c.output.seq + " sent it and was answered " + c.output.error }) : null,
          c.output && !refused ? el("div", { class: "note", text: "came back in request #" + c.output.seq }) : null,
          bad ? c.violations.map((v) => el("div", { class: "violation-note", text: "\u26a0 contract violation (" + v.kind + "): " + v.message })) : null)));
    }
    return el("table", { class: "calls" },
      el("colgroup", {}, ["name", "args", "caller", "route", "output"].map((c) => el("col", { class: "c-" + c }))),
      el("thead", {}, el("tr", {}, ["Call", "Arguments", "Caller", "Route", "Output"].map((h) => el("th", { text: h })))),
      body);
  }

  // ---------------------------------------------------------------- the timeline
  function idsOf(items) {
    const ids = new Set();
    for (const item of items || []) {
      if (item && item.id) ids.add(item.id);
      if (item && item.call_id && !String(item.type || "").endsWith("_output")) ids.add(item.call_id + ":" + item.type);
    }
    return ids;
  }

  // What a client sent, one key per item: a message by its role and text (a string input and
  // its replay as a message item are the same message), anything else by its JSON.
  function sentKey(item) {
    if (item && typeof item === "object" && (item.type || "message") === "message" && item.role) return "msg:" + item.role + ":" + textOf(item.content);
    return "json:" + JSON.stringify(item);
  }
  function sentItems(req) {
    if (typeof req.input === "string") return [{ type: "message", role: "user", content: req.input }];
    return Array.isArray(req.input) ? req.input : [];
  }

  function renderTimeline(entries) {
    const produced = new Set();
    const authored = [];  // the keys of what the client wrote (not sent back), in order
    const list = el("ol", { class: "timeline" });
    for (const entry of entries) {
      const req = entry.request && typeof entry.request === "object" ? entry.request : {};
      // Items an earlier response produced are left out; and a store:false replay sends the
      // whole history again, so what the client wrote before leads its own items once more.
      const replay = !req.previous_response_id && !req.conversation;
      const shown = [];
      let next = 0;
      let matching = replay;
      for (const item of sentItems(req)) {
        if (!fresh(item, produced)) continue;
        if (matching && next < authored.length && sentKey(item) === authored[next]) { next++; continue; }
        matching = false;
        shown.push(item);
      }
      list.appendChild(renderEntry(entry, shown));
      if (entry.status < 400) for (const item of shown) authored.push(sentKey(item));
      const output = (entry.response && entry.response.output) || [];
      for (const id of idsOf(output)) produced.add(id);
    }
    return list;
  }

  function fresh(item, produced) {
    if (!item || typeof item !== "object") return true;
    if (item.id && produced.has(item.id)) return false;
    if (item.call_id && item.type && produced.has(item.call_id + ":" + item.type)) return false;
    return true;
  }

  function renderEntry(entry, sent) {
    const req = entry.request && typeof entry.request === "object" ? entry.request : {};
    const res = entry.response && typeof entry.response === "object" ? entry.response : {};
    const f = entry.figures || {};
    const bad = entry.status >= 400;
    const raw = el("div", { class: "raw", hidden: true });
    const showRaw = (what, value) => () => {
      const open = !raw.hidden && raw.dataset.what === what;
      raw.dataset.what = what;
      raw.replaceChildren(el("div", { class: "note", text: what + " #" + entry.seq }), el("pre", { text: JSON.stringify(value, null, 2) }));
      raw.hidden = open;
    };
    const li = el("li", { class: bad ? "bad entry" : "entry", "data-seq": String(entry.seq) },
      el("div", { class: "entry-head" },
        el("span", { class: "what", text: "#" + entry.seq + " " + entry.method + " " + entry.path }),
        statusBadge(entry.status),
        entry.scenario ? el("span", { text: "scenario " + entry.scenario }) : null,
        req.stream ? badge("stream", "link") : null,
        req.store === false ? badge("store:false", "link") : null,
        req.previous_response_id ? el("span", { class: "note mono", text: "\u21b3 " + req.previous_response_id }) : null,
        el("span", { class: "note", text: time(entry.at) + (f.latency_ms !== undefined ? " \u00b7 " + Math.round(f.latency_ms) + " ms" : "") }),
        (entry.route || []).length ? el("span", { class: "note", text: "route: " + entry.route.join(" \u2192 ") }) : null,
        el("span", { class: "actions" },
          el("button", { type: "button", text: "Request JSON", onclick: showRaw("Request", entry.request) }),
          el("button", { type: "button", text: "Response JSON", onclick: showRaw("Response", entry.response) }),
          // A saved trace has no server of its own to send the request to.
          trace ? null : el("button", { type: "button", text: "Copy as curl", onclick: () => copyCurl(entry) }))));

    const items = el("ul", { class: "items" });
    for (const item of sent) items.appendChild(renderItem(item, "sent"));
    const output = Array.isArray(res.output) ? res.output : [];
    for (const item of output) items.appendChild(renderItem(item, "received"));
    li.appendChild(items);

    if (res.error) li.appendChild(el("div", { class: "error-text", text: "Error " + entry.status + (res.error.code ? " (" + res.error.code + ")" : "") + ": " + res.error.message }));
    if (entry.fault) li.appendChild(el("div", { class: "fault" }, el("strong", { text: "Injected fault: " }), entry.fault));
    if (entry.near_miss) li.appendChild(nearMiss(entry.near_miss));
    if ((entry.contract || []).length) {
      li.appendChild(el("div", { class: "violations" }, el("strong", { text: "Contract violations" }),
        el("ul", {}, entry.contract.map((v) => el("li", { text: v.kind + " of " + v.tool + " (" + v.call_id + "): " + v.message })))));
    }
    if ((entry.images || []).length) {
      li.appendChild(el("div", { class: "note" }, "Images the program emitted: ", entry.images.join(", ")));
    }
    li.appendChild(raw);
    return li;
  }

  function renderItem(item, direction) {
    // A request's items are the client's, anything it sent (a refused request is journalled too):
    // a type that is not text is shown as an item, as its JSON.
    const kind = item && typeof item === "object" ? item.type : undefined;
    const type = typeof kind === "string" && kind ? kind : !kind && item && item.role ? "message" : "item";
    const head = (kind, ...rest) => el("div", {}, el("span", { class: "kind", text: kind }), el("span", { class: "dir", text: direction === "sent" ? "sent by the client" : "from the model" }), ...rest);
    if (type === "message") {
      const text = textOf(item.content);
      return el("li", { class: "item message" }, head(item.role === "assistant" ? "message" : (item.role || "message") + " message"), el("pre", { text: text }));
    }
    if (type === "reasoning") {
      const texts = (parts) => (Array.isArray(parts) ? parts.map((s) => s && s.text).filter(Boolean).join("\n") : "");
      const summary = texts(item.summary);
      const content = texts(item.content);
      return el("li", { class: "item reasoning" }, head("reasoning"), el("pre", { text: summary || content || "(encrypted or empty)" }));
    }
    if (type === "program") {
      return el("li", { class: "item program" }, head("program", el("span", { class: "note mono", text: " " + item.call_id })), codeBlock(item.code));
    }
    if (type === "program_output") {
      return el("li", { class: "item" }, head("program_output", el("span", { class: "note", text: " " + (item.status || "") })), el("pre", { text: pretty(item.result) }));
    }
    if (type.endsWith("_call_output")) {
      const caller = item.caller && item.caller.type === "program" ? " to program " + item.caller.caller_id : "";
      return el("li", { class: "item" }, head(type, el("span", { class: "note mono", text: " " + item.call_id + caller })), el("pre", { text: pretty(item.output) }));
    }
    if (type.endsWith("_call")) {
      const route = item.caller && item.caller.type === "program" ? "from program " + item.caller.caller_id : "direct";
      return el("li", { class: "item" }, head(type, el("strong", { class: "mono", text: " " + (item.name || "") }), el("span", { class: "note", text: " " + route })),
        el("pre", { text: pretty(item.arguments !== undefined ? item.arguments : item.input) }));
    }
    return el("li", { class: "item" }, head(type), el("pre", { text: JSON.stringify(item, null, 2) }));
  }

  function nearMiss(report) {
    const rows = (report.near_misses || []).map((m) => el("tr", {}, el("td", { class: "mono", text: m.scenario }), el("td", { text: m.field }), el("td", { text: m.reason })));
    return el("div", { class: "nearmiss" },
      el("strong", { text: "No scenario matched \u2014 near misses" }),
      report.input ? el("div", { class: "note" }, "Input: ", el("span", { class: "mono", text: short(String(report.input), 200) })) : null,
      rows.length ? el("table", {}, el("thead", {}, el("tr", {}, ["Scenario", "Field", "Why not"].map((h) => el("th", { text: h })))), el("tbody", {}, rows)) : el("p", { text: "No scenario came close." }),
      report.inline_code === false ? el("div", { class: "note", text: "The latest user message has no ```js block to run inline either." }) : null);
  }

  // ---------------------------------------------------------------- copy as curl
  function curl(entry) {
    const lines = ["curl " + (entry.request && entry.request.stream ? "-N " : "") + "-sS -X " + entry.method + " '" + location.origin + entry.path + "' \\",
      "  -H 'Content-Type: application/json' \\",
      "  -H \"Authorization: Bearer ${PTC_EMULATOR_API_KEY:-sk-ptc-emulator}\" \\"];
    if (entry.scope) lines.push("  -H 'x-ptc-emulator-scope: " + String(entry.scope).replace(/'/g, "'\\''") + "' \\");
    lines.push("  --data-binary @- <<'JSON'", JSON.stringify(entry.request, null, 2), "JSON");
    return lines.join("\n");
  }

  async function copyCurl(entry) {
    const text = curl(entry);
    let copied = false;
    try {
      if (navigator.clipboard && window.isSecureContext) { await navigator.clipboard.writeText(text); copied = true; }
    } catch (e) { copied = false; }
    $("copy-title").textContent = copied ? "Copied to the clipboard" : "Copy this command";
    $("copy-text").value = text;
    $("copy-dialog").showModal();
    if (!copied) $("copy-text").select();
  }

  // ---------------------------------------------------------------- live updates
  // Server-sent events read with fetch, so the key goes in the Authorization header like every
  // other call (EventSource cannot send headers, and a key in a URL ends up in logs).
  let listening = null;
  async function listen() {
    if (listening) listening.abort();
    const controller = new AbortController();
    listening = controller;
    while (!controller.signal.aborted) {
      try {
        const reply = await fetch(API + "/events", { headers: headers(), signal: controller.signal, cache: "no-store" });
        if (reply.status === 401) { askForKey(true); return; }
        if (!reply.ok || !reply.body) throw new Error("HTTP " + reply.status);
        setLive(true);
        const reader = reply.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const frame = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const kind = (frame.match(/^event: (.*)$/m) || [])[1];
            if (kind === "journal" || kind === "hello") refresh();
          }
        }
      } catch (error) {
        if (controller.signal.aborted) return;
        setLive(false, "reconnecting");
        await new Promise((resolve) => setTimeout(resolve, 2000));
      }
    }
  }

  // ---------------------------------------------------------------- start
  // The fragment says what to show: #scope=<test scope>&c=<conversation id> (links from the
  // pytest plugin's failure reports), and may carry the key once.
  function fromFragment() {
    const params = fragment();
    fillSelect($("f-scope"), [], params.get("scope") || "");
    const c = params.get("c");
    state.selected = c && /^c\d+$/.test(c) ? Number(c.slice(1)) : null;
    state.seqs = "";
  }
  window.addEventListener("hashchange", () => {
    const hadKey = fragment().has("key");
    takeKey();
    fromFragment();
    $("view").replaceChildren();
    refresh();
    if (hadKey) listen();
  });
  fromFragment();
  if (trace) {
    setLive(false, "saved trace");
    $("key-button").hidden = true;
    if (trace.title) document.title = trace.title + " \u2014 ptc-emulator trace";
    refresh();
  } else {
    refresh();
    listen();
  }
})();
