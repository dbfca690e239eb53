// The runtime a program sees, evaluated once in every fresh context before any program code.
//
// It removes what a program must not reach, pins every source of nondeterminism, defines the
// only three ways out (`tools.<name>(args)`, `text(...)`, `image(...)`) and a controller that
// the host reaches through a token-guarded entry point. Everything the host relies on is built
// from built-ins captured here, before user code runs, and from null-prototype records, so a
// program that rewrites Array/Object/Promise/JSON prototypes can only break itself.
//
// The host talks to the controller only by string eval with a timeout (the one mini-racer call
// that stays safe once a program may be spinning in a microtask).
(function (token, nonce) {
  'use strict';
  const G = globalThis;

  // ---- primordials ---------------------------------------------------------------------
  const P = G.Promise;
  const then = P.prototype.then;
  const rejected = (e) => Reflect.apply(P.reject, P, [e]);
  const apply = Reflect.apply;
  const S = G.JSON.stringify;
  const J = G.JSON.parse;
  const Str = G.String;
  const Err = G.Error;
  const TypeErr = G.TypeError;
  const keys = G.Object.keys;
  const hasOwn = G.Object.hasOwn;
  const defineProperty = G.Object.defineProperty;
  const freeze = G.Object.freeze;
  const setPrototypeOf = G.Object.setPrototypeOf;
  const isArray = G.Array.isArray;
  const sort = G.Array.prototype.sort;
  const strSplit = G.String.prototype.split;
  const split = (s, sep) => apply(strSplit, s, [sep]);
  const exec = G.RegExp.prototype.exec;
  const isWellFormed = G.String.prototype.isWellFormed;
  const charCode = G.String.prototype.charCodeAt;
  const RealDate = G.Date;
  const errToString = Err.prototype.toString;
  // An internal promise with an own `constructor` of undefined: `then` on it takes the default
  // constructor without reading `constructor` or `Symbol.species`, so a program's getters there
  // never see the runtime's own promise traffic (which differs between a live resume and a replay).
  const opaque = (p) => { defineProperty(p, 'constructor', { value: undefined }); return p; };

  // A private macrotask boundary, captured before Atomics and SharedArrayBuffer are removed.
  // The callback of a delayed platform task runs only after a full microtask checkpoint, that
  // is, only when the program is quiescent: finished, or blocked on unresolved tool promises.
  const cell = new G.Int32Array(new G.SharedArrayBuffer(4));
  const waitAsync = G.Atomics.waitAsync;
  // The host's doorbell: a native function that wakes the host when a report is ready, so the
  // host waits instead of polling. Put on the global object by the host before this script,
  // taken off it here, before any program exists.
  const ring = G.__ptc_ring;
  delete G.__ptc_ring;
  const nextTask = (f) => { apply(then, opaque(waitAsync(cell, 0, 0, 0.001).value), [f]); };

  // ---- stacks -------------------------------------------------------------------------------
  // The runtime's own frames (this script) never show in a program's stacks: they differ between
  // a live resume and a replay, and they are not the program's. V8 reads `Error.prepareStackTrace`
  // with an ordinary Get, so an accessor keeps a program's own formatter working, on frames
  // from which the runtime's are already removed.
  const RUNTIME_URL = 'ptc-prelude.js';
  let callSite = null;
  defineProperty(Err, 'prepareStackTrace', { value: (e, frames) => frames[0], configurable: true, writable: true });
  callSite = G.Object.getPrototypeOf(new Err().stack);
  delete Err.prepareStackTrace;
  const siteFile = callSite.getScriptNameOrSourceURL;
  const siteText = callSite.toString;
  // A program's own formatter sees each frame through a view: a frame's script hash is the hash
  // of the whole entry script, whose configuration (the journal, the context's nonce) differs
  // between a live run and its replay, so a program that passed it to a tool would diverge on a
  // retry. The view names no script (''); every other getter is the frame's own.
  const frameOf = new G.WeakMap();
  const frameGet = G.WeakMap.prototype.get;
  const frameSet = G.WeakMap.prototype.set;
  const create = G.Object.create;
  const siteView = create(G.Object.prototype);
  const siteNames = G.Object.getOwnPropertyNames(callSite);
  for (let i = 0; i < siteNames.length; i++) {
    const name = siteNames[i];
    const method = callSite[name];
    if (name === 'constructor' || typeof method !== 'function') continue;
    const view = name === 'getScriptHash'
      ? function getScriptHash() { return ''; }
      : function () { return apply(method, apply(frameGet, frameOf, [this]), []); };
    defineProperty(siteView, name, { value: view, writable: true, enumerable: false, configurable: true });
  }
  const viewOf = (frame) => {
    const v = create(siteView);
    apply(frameSet, frameOf, [v, frame]);
    return v;
  };
  const programFrames = (frames) => {
    const kept = [];
    for (let i = 0; i < frames.length; i++) {
      if (apply(siteFile, frames[i], []) !== RUNTIME_URL) defineProperty(kept, kept.length, { value: frames[i], writable: true, enumerable: true, configurable: true });
    }
    return kept;
  };
  const header = (e) => {
    try { return apply(errToString, e, []); } catch (e2) { return 'Error'; }
  };
  let userPrepare;
  const prepare = function prepareStackTrace(e, frames) {
    const kept = programFrames(frames);
    if (typeof userPrepare === 'function') {
      const views = [];
      for (let i = 0; i < kept.length; i++) defineProperty(views, i, { value: viewOf(kept[i]), writable: true, enumerable: true, configurable: true });
      return apply(userPrepare, Err, [e, views]);
    }
    let r = header(e);
    for (let i = 0; i < kept.length; i++) r += '\n    at ' + apply(siteText, kept[i], []);
    return r;
  };
  defineProperty(Err, 'prepareStackTrace', {
    configurable: false, enumerable: false,
    get() { return prepare; },
    set(v) { userPrepare = v; },
  });

  // ---- isolation -------------------------------------------------------------------------
  // Not ECMAScript, nondeterministic, or allocating memory the heap limit does not count.
  for (const k of ['console', 'WebAssembly', 'SharedArrayBuffer', 'Atomics', 'FinalizationRegistry',
                   'WeakRef', 'Temporal', 'ArrayBuffer', 'DataView', 'Int8Array', 'Uint8Array',
                   'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array',
                   'Float16Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array']) {
    delete G[k];
  }
  // mini-racer declares its timer globals with `var`: they cannot be deleted, only neutered.
  for (const k of ['setTimeout', 'clearTimeout', '__timer_manager']) {
    defineProperty(G, k, { value: undefined, writable: false });
  }

  // ---- determinism -----------------------------------------------------------------------
  let now = 0;
  let ra = 0, rb = 0, rc = 0, rd = 0;
  const random = function random() {  // sfc32
    ra >>>= 0; rb >>>= 0; rc >>>= 0; rd >>>= 0;
    let t = (ra + rb) | 0;
    ra = rb ^ (rb >>> 9);
    rb = (rc + (rc << 3)) | 0;
    rc = (rc << 21) | (rc >>> 11);
    rd = (rd + 1) | 0;
    t = (t + rd) | 0;
    rc = (rc + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  defineProperty(G.Math, 'random', { value: random, writable: true, configurable: true });

  const PinnedDate = function Date(...args) {
    if (new.target === undefined) return new RealDate(now).toString();
    return args.length ? new RealDate(...args) : new RealDate(now);
  };
  PinnedDate.prototype = RealDate.prototype;
  defineProperty(RealDate.prototype, 'constructor', { value: PinnedDate, writable: true, configurable: true });
  PinnedDate.now = function now_() { return now; };
  PinnedDate.parse = RealDate.parse;
  PinnedDate.UTC = RealDate.UTC;
  defineProperty(G, 'Date', { value: PinnedDate, writable: true, configurable: true });

  // Intl.DateTimeFormat formats "now" when given no date: pin it too.
  const DTF = G.Intl.DateTimeFormat.prototype;
  const formatGetter = G.Object.getOwnPropertyDescriptor(DTF, 'format').get;
  const formatToParts = DTF.formatToParts;
  defineProperty(DTF, 'format', {
    configurable: true,
    get() { const f = apply(formatGetter, this, []); return (d) => f(d === undefined ? now : d); },
  });
  defineProperty(DTF, 'formatToParts', {
    configurable: true, writable: true,
    value: function formatToParts_(d) { return apply(formatToParts, this, [d === undefined ? now : d]); },
  });

  // ---- canonical JSON (sorted keys), used to compare a replayed call with the journal ------
  const canonValue = (v) => {
    if (v === null || typeof v !== 'object') return S(v);
    let r;
    if (isArray(v)) {
      r = '[';
      for (let i = 0; i < v.length; i++) r += (i ? ',' : '') + canonValue(v[i]);
      return r + ']';
    }
    const ks = apply(sort, keys(v), []);
    r = '{';
    for (let i = 0; i < ks.length; i++) r += (i ? ',' : '') + S(ks[i]) + ':' + canonValue(v[ks[i]]);
    return r + '}';
  };
  // Text that is not JSON (a client's modified arguments) has no canonical form: null, which equals
  // no canonical text, so the comparison below is a divergence, not a parse error of the controller.
  const canon = (text) => {
    try {
      return canonValue(J(text));
    } catch (e) {
      return null;
    }
  };

  // ---- the program's state -----------------------------------------------------------------
  // Every container the controller writes to has a null prototype: writing past the end of an
  // ordinary array consults Array.prototype, where a program could have put an index accessor
  // that swallows the write and hands back a forged record on the next read.
  let configured = false;
  let toolNames = [];
  let maxCalls = 0, maxOut = 0, maxArgs = 0, callBytes = 0;
  let argBytes = 0;              // what the calls so far cost against maxArgs (see `wireLength`)
  let journal = setPrototypeOf([], null);
  const calls = { __proto__: null };   // index -> {index, name, args, done, res, rej}
  let nCalls = 0;
  const out = { __proto__: null };     // index -> JSON text of an output record
  let nOut = 0, outBytes = 0;
  let state = 'running';         // running | completed | failed
  let failure = '';
  let abort = null;              // {kind, message}: a limit was hit; not catchable by the program

  const doAbort = (kind, message) => {
    if (abort === null) abort = { __proto__: null, kind, message };
    return new Err(message);
  };

  // The output limit counts UTF-8 bytes, as the response carries them (not UTF-16 units: a
  // program of CJK text would otherwise get three times the limit through).
  const utf8Length = (s) => {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = apply(charCode, s, [i]);
      n += c < 0x80 ? 1 : c < 0x800 ? 2 : (c >= 0xd800 && c < 0xdc00) ? 2 : (c >= 0xdc00 && c < 0xe000) ? 2 : 3;
    }
    return n;
  };

  // A call's name or arguments as a request that sends the call back carries them: inside a JSON
  // string, every non-ASCII character (and control character) a six-byte \uXXXX escape at worst.
  const wireLength = (s) => {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = apply(charCode, s, [i]);
      n += c === 34 || c === 92 ? 2 : c < 0x20 || c >= 0x80 ? 6 : 1;
    }
    return n;
  };

  // The output limit counts what the program outputs: a text's characters or an image's URL as
  // the JSON string that carries it (quotes aside), and the line break (`\n`, two bytes) that joins
  // a text to the one before. The record around it is the runtime's, bounded by MAX_OUTPUTS.
  const MAX_OUTPUTS = 100000;
  let nText = 0;
  const emit = (type, field, json) => {
    if (abort !== null) throw new Err(abort.message);
    if (nOut >= MAX_OUTPUTS) {
      throw doAbort('limit', 'program exceeded the limit of ' + MAX_OUTPUTS + ' text() and image() calls');
    }
    outBytes += utf8Length(json) - 2 + (type === 'text' && nText > 0 ? 2 : 0);
    if (outBytes > maxOut) throw doAbort('limit', 'program output exceeded the limit of ' + maxOut + ' bytes');
    if (type === 'text') nText++;
    out[nOut++] = '{"type":"' + type + '","' + field + '":' + json + '}';
  };

  // The host parses arguments with a recursive parser and checks them against a JSON Schema:
  // their nesting is bounded here, before they leave the isolate.
  const MAX_DEPTH = 64;
  const nesting = (text) => {
    let level = 0, deepest = 0, inString = false;
    for (let i = 0; i < text.length; i++) {
      const c = apply(charCode, text, [i]);
      if (inString) {
        if (c === 92) i++;             // backslash: skip the escaped character
        else if (c === 34) inString = false;
      } else if (c === 34) inString = true;
      else if (c === 91 || c === 123) { if (++level > deepest) deepest = level; }
      else if (c === 93 || c === 125) level--;
    }
    return deepest;
  };

  const IMAGE_DATA = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}$/;
  const IMAGE_HTTP = /^https:\/\/[^\s]+$/;
  const imageUrl = (x) => {
    let url = x;
    if (x !== null && typeof x === 'object' && !isArray(x)) url = x.image_url !== undefined ? x.image_url : x.url;
    if (typeof url === 'string' && apply(isWellFormed, url, []) && (apply(exec, IMAGE_DATA, [url]) !== null || apply(exec, IMAGE_HTTP, [url]) !== null)) {
      return url;
    }
    throw new TypeErr('image() takes a data:image/(png|jpeg|gif|webp);base64,... URL, an https:// URL, ' +
                      'or an object with one of those as image_url');
  };

  const deliver = (entry) => {   // a journal entry's output as the program receives it
    const text = entry.output;
    try { return J(text); } catch (e) { return text; }
  };

  const makeTool = (name, takesText) => function (args) {
    if (abort !== null) return rejected(new Err(abort.message));
    let argsJson;
    if (takesText) {
      if (typeof args !== 'string') {
        return rejected(new TypeErr('tools.' + name + '() takes one argument: a string'));
      }
      argsJson = S(args);
    } else {
      try {
        argsJson = S(args === undefined ? {} : args);
      } catch (e) {
        return rejected(e);
      }
      if (typeof argsJson !== 'string' || argsJson[0] !== '{') {
        return rejected(new TypeErr('tools.' + name + '() takes one argument: a JSON-serialisable object'));
      }
      if (nesting(argsJson) > MAX_DEPTH) {
        return rejected(new TypeErr('tools.' + name + '() arguments nest deeper than ' + MAX_DEPTH + ' levels'));
      }
    }
    if (nCalls >= maxCalls) {
      return rejected(doAbort('limit', 'program exceeded the limit of ' + maxCalls + ' tool calls'));
    }
    // A string is never shorter escaped: one too long is refused before it is scanned.
    argBytes += callBytes + (argsJson.length + name.length > maxArgs ? maxArgs + 1 : wireLength(name) + wireLength(argsJson));
    if (argBytes > maxArgs) {
      return rejected(doAbort('limit', 'program tool calls exceeded the limit of ' + maxArgs +
        ' bytes of names and arguments (--max-argument-bytes)'));
    }
    const index = nCalls++;
    const call = { __proto__: null, index, name, args: argsJson, done: false, res: null, rej: null };
    calls[index] = call;
    return new P((res, rej) => { call.res = res; call.rej = rej; });
  };

  const settle = (call, entry) => {
    call.done = true;
    const res = call.res, rej = call.rej;
    call.res = call.rej = null;
    if (entry.error) rej(new Err(Str(entry.output))); else res(deliver(entry));
  };

  // ---- host-visible records, built by hand -------------------------------------------------
  const outJson = () => {
    let r = '[';
    for (let i = 0; i < nOut; i++) r += (i ? ',' : '') + out[i];
    return r + ']';
  };
  const callJson = (c) => '{"index":' + c.index + ',"name":' + S(c.name) + ',"arguments":' + S(c.args) + '}';
  const report = (status, extra) => '{"status":"' + status + '","calls":' + nCalls + ',"out":' + outJson() + extra + '}';
  const fail = (kind, message) => report('failed', ',"kind":' + S(kind) + ',"message":' + S(Str(message)));

  const errorText = (e) => {
    try {
      if (e !== null && typeof e === 'object' && typeof e.stack === 'string') return e.stack;
      return 'Uncaught ' + Str(e);
    } catch (e2) {
      return 'Uncaught exception';
    }
  };

  // One decision per quiescent point. The previous macrotask's microtasks have drained.
  const round = () => {
    if (abort !== null) return fail(abort.kind, abort.message);
    // A program that ended (even by an error) short of the journal did not run as recorded.
    if (journal.length > nCalls && state !== 'running') {
      return fail('divergence', 'the journal holds ' + journal.length + ' results but the program made only ' +
                  nCalls + ' tool calls');
    }
    if (state === 'failed') return fail('runtime', failure);
    if (state === 'completed') return report('completed', '');
    let progressed = false;
    for (let i = 0; i < nCalls; i++) {
      const c = calls[i];
      if (c.done || i >= journal.length) continue;
      const entry = journal[i];
      const given = canon(entry.args);
      if (entry.name !== c.name || given === null || given !== canon(c.args)) {
        return fail('divergence', 'tool call ' + i + ' was ' + c.name + '(' + c.args + ') on replay but the journal has ' +
                    entry.name + '(' + entry.args + ')');
      }
      settle(c, entry);
      progressed = true;
    }
    if (progressed) return null;
    if (journal.length > nCalls) {
      return fail('divergence', 'the journal holds ' + journal.length + ' results but the program made only ' +
                  nCalls + ' tool calls');
    }
    let pending = '', n = 0;
    for (let i = 0; i < nCalls; i++) if (!calls[i].done) pending += (n++ ? ',' : '') + callJson(calls[i]);
    if (n === 0) {
      return fail('runtime', 'the program is waiting on a promise that can never settle (no tool call is pending)');
    }
    return report('suspended', ',"pending":[' + pending + ']');
  };

  let pumped = null;
  const configure = (cfg) => {
      now = cfg.now;
      ra = cfg.seed[0]; rb = cfg.seed[1]; rc = cfg.seed[2]; rd = cfg.seed[3];
      for (let i = 0; i < 16; i++) random();   // sfc32 warm-up
      maxCalls = cfg.maxCalls;
      maxOut = cfg.maxOut;
      maxArgs = cfg.maxArgs;
      callBytes = cfg.callBytes;
      journal = setPrototypeOf(cfg.journal, null);
      toolNames = cfg.tools;
      const textTools = { __proto__: null };
      for (let i = 0; i < cfg.textTools.length; i++) textTools[cfg.textTools[i]] = true;
      // `a.b` is `tools.a.b`: namespaces are frozen, prototype-less objects like `tools` itself.
      const tools = { __proto__: null };
      const spaces = [];
      for (let i = 0; i < toolNames.length; i++) {
        const path = split(toolNames[i], '.');
        let at = tools;
        for (let k = 0; k < path.length - 1; k++) {
          if (at[path[k]] === undefined) { at[path[k]] = { __proto__: null }; spaces[spaces.length] = at[path[k]]; }
          at = at[path[k]];
        }
        at[path[path.length - 1]] = makeTool(toolNames[i], textTools[toolNames[i]] === true);
      }
      for (let i = 0; i < spaces.length; i++) freeze(spaces[i]);
      freeze(tools);
      const def = (k, v) => defineProperty(G, k, { value: v, writable: false, configurable: false, enumerable: false });
      def('tools', tools);
      // Strings as they are, anything else as JSON; what JSON cannot write (undefined, a symbol, a
      // function) as String() writes it: `Symbol(x)`, not the `undefined` JSON.stringify returns.
      const shown = (x) => { if (typeof x === 'string') return x; const j = S(x); return j === undefined ? Str(x) : j; };
      def('text', function text(...parts) {
        let s = '';
        for (let i = 0; i < parts.length; i++) s += (i ? ' ' : '') + shown(parts[i]);
        emit('text', 'text', S(s));
      });
      def('image', function image(x) { emit('image', 'url', S(imageUrl(x))); });
  };
  const controller = {
    __proto__: null,
    start(fn) {
      let promise;
      try {
        promise = fn();
      } catch (e) {
        state = 'failed'; failure = errorText(e);
        return;
      }
      try { opaque(promise); } catch (e) { /* not a promise of ours: nothing to hide */ }
      apply(then, promise, [
        () => { if (state === 'running') state = 'completed'; },
        (e) => { if (state === 'running') { state = 'failed'; failure = errorText(e); } },
      ]);
    },
    // configure + start + pump, in the one eval that also compiles the program (the host's
    // entry script, `go(async () => {<program>\n}, "<configuration>")`). The configuration,
    // which holds the history, follows the program: the text before the program is the same for
    // every run, so the program's own line and column positions never depend on its history.
    // A program that breaks out of its function can choose go's arguments, but not the nonce,
    // which only the configuration after it carries (and which it cannot capture: the host
    // escapes every character that could continue a string, template or comment the program
    // left open). One call, with the nonce, or none at all.
    go(fn, cfgText) {
      if (configured) throw new Err('denied');
      configured = true;
      if (arguments.length !== 2 || typeof cfgText !== 'string') throw new Err('denied');
      const cfg = J(cfgText);
      if (cfg === null || typeof cfg !== 'object' || cfg.nonce !== nonce) throw new Err('denied');
      configure(cfg);
      controller.start(fn);
      controller.pump();
    },
    // Drive rounds inside the isolate, one macrotask each, with no host round trip between them.
    pump() {
      pumped = null;
      const tick = () => {
        let r;
        try { r = round(); } catch (e) { r = fail('runtime', 'host controller error: ' + errorText(e)); }
        if (r === null) nextTask(tick); else { pumped = r; if (typeof ring === 'function') ring(); }
      };
      nextTask(tick);
    },
    poll() { return pumped; },
    // Live resume: results for the pending calls arrive after the suspension.
    supply(entriesJson) {
      const more = J(entriesJson);
      for (let i = 0; i < more.length; i++) journal[journal.length] = more[i];
    },
  };
  defineProperty(G, '__ptc', {
    value: function __ptc(t) { if (t !== token) throw new Err('denied'); return controller; },
    writable: false, configurable: false, enumerable: false,
  });
})
