"""What a program cannot reach, cannot overwrite, and cannot forge."""

from __future__ import annotations

import json
import re

import pytest

from ptc_emulator.sandbox import Completed, PendingCall, Suspended, TextOutput
from tests.sandbox.sandbox_harness import SyncPool
from tests.sandbox.sandbox_support import answer, completed_texts, failed, program

REMOVED = [
    "console", "setTimeout", "clearTimeout", "__timer_manager", "WebAssembly", "SharedArrayBuffer",
    "Atomics", "ArrayBuffer", "DataView", "Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array",
    "Uint16Array", "Int32Array", "Uint32Array", "Float16Array", "Float32Array", "Float64Array",
    "BigInt64Array", "BigUint64Array", "FinalizationRegistry", "WeakRef", "Temporal",
]  # fmt: skip

# Every global a program may see (mini-racer is pinned exactly, so V8's set is fixed). A new
# global here is a new capability and must be looked at before it is allowed.
ALLOWED_GLOBALS = {
    "AggregateError", "Array", "AsyncDisposableStack", "BigInt", "Boolean", "Date", "DisposableStack",
    "Error", "EvalError", "Function", "Infinity", "Intl", "Iterator", "JSON", "Map", "Math", "NaN",
    "Number", "Object", "Promise", "Proxy", "RangeError", "ReferenceError", "Reflect", "RegExp", "Set",
    "String", "SuppressedError", "Symbol", "SyntaxError", "TypeError", "URIError", "WeakMap", "WeakSet",
    "decodeURI", "decodeURIComponent", "encodeURI", "encodeURIComponent", "escape", "eval", "globalThis",
    "isFinite", "isNaN", "parseFloat", "parseInt", "undefined", "unescape",
    # the runtime's own
    "tools", "text", "image", "__ptc",
    # mini-racer's timer globals cannot be deleted: they are there, as undefined and read-only
    "setTimeout", "clearTimeout", "__timer_manager",
}  # fmt: skip


def test_removed_globals_are_undefined(pool: SyncPool) -> None:
    # `typeof X` on the bare identifier: a deleted global gives "undefined" rather than a
    # ReferenceError, and so does a neutered one.
    bare = "\n".join(f"text('{n}', typeof {n}, typeof globalThis['{n}']);" for n in REMOVED)
    assert completed_texts(pool.run(program(bare))) == [f"{n} undefined undefined" for n in REMOVED]


def test_timer_globals_cannot_be_restored(pool: SyncPool) -> None:
    code = """
    setTimeout = () => 1;
    globalThis.clearTimeout = () => 2;
    try { Object.defineProperty(globalThis, '__timer_manager', {value: 3}); } catch (e) { text(e.name); }
    text(typeof setTimeout, typeof clearTimeout, typeof __timer_manager);
    """
    assert completed_texts(pool.run(program(code))) == ["TypeError", "undefined undefined undefined"]


def test_no_unexpected_globals(pool: SyncPool) -> None:
    code = "text(JSON.stringify(Reflect.ownKeys(globalThis).map(String)));"
    names = set(json.loads(completed_texts(pool.run(program(code)))[0]))
    assert names - ALLOWED_GLOBALS == set()
    assert {"tools", "text", "image", "JSON", "Promise"} <= names


@pytest.mark.parametrize(
    "attempt",
    [
        "eval('1 + 1')",
        "(0, eval)('1 + 1')",
        "new Function('return 1')()",
        "Function('return 1')()",
        "(async function () {}).constructor('return 1')",
        "(function* () {}).constructor('yield 1')",
        "(async function* () {}).constructor('yield 1')",
        "({}).constructor.constructor('return globalThis')()",
    ],
)
def test_code_generation_from_strings_is_refused(pool: SyncPool, attempt: str) -> None:
    code = f"try {{ {attempt}; text('generated'); }} catch (e) {{ text(e.name + ': ' + e.message); }}"
    assert completed_texts(pool.run(program(code))) == [
        "EvalError: Code generation from strings disallowed for this context"
    ]


def test_dynamic_import_rejects(pool: SyncPool) -> None:
    code = """
    for (const m of ['fs', 'node:child_process', 'https://example.com/x.js', './program.js']) {
      text(await import(m).then(() => 'loaded ' + m, (e) => 'rejected ' + m));
    }
    """
    assert completed_texts(pool.run(program(code))) == [
        "rejected fs",
        "rejected node:child_process",
        "rejected https://example.com/x.js",
        "rejected ./program.js",
    ]


def test_host_objects_are_absent(pool: SyncPool) -> None:
    names = ["require", "process", "fetch", "XMLHttpRequest", "Deno", "Bun", "module", "exports",
             "importScripts", "postMessage", "structuredClone", "queueMicrotask", "setInterval"]  # fmt: skip
    code = "\n".join(f"text(typeof {n});" for n in names)
    assert completed_texts(pool.run(program(code))) == ["undefined"] * len(names)


def test_tools_text_and_image_cannot_be_overwritten(pool: SyncPool) -> None:
    code = """
    const fake = {add: async () => 'forged'};
    tools = fake; text = () => {}; image = () => {};
    globalThis.tools = fake; globalThis.text = null;
    for (const k of ['tools', 'text', 'image']) {
      try { Object.defineProperty(globalThis, k, {value: fake}); text('redefined ' + k); }
      catch (e) { text(e.name + ' ' + k); }
      text('delete ' + k + ' ' + delete globalThis[k]);
    }
    tools.add = fake.add;
    try { Object.defineProperty(tools, 'add', {value: fake.add}); } catch (e) { text(e.name + ' tools.add'); }
    try { Object.setPrototypeOf(tools, fake); } catch (e) { text(e.name + ' proto'); }
    text('frozen ' + Object.isFrozen(tools) + ' ' + (Object.getPrototypeOf(tools) === null));
    text('sum ' + await tools.add({a: 1, b: 2}));
    """
    first = pool.run(program(code))
    assert isinstance(first, Suspended)
    assert first.pending == (PendingCall(0, "add", '{"a":1,"b":2}'),)
    done = pool.run(program(code, journal=[answer(p) for p in first.pending]))
    assert completed_texts(done) == [
        "TypeError tools", "delete tools false",
        "TypeError text", "delete text false",
        "TypeError image", "delete image false",
        "TypeError tools.add", "TypeError proto",
        "frozen true true",
        "sum 3",
    ]  # fmt: skip


def test_strict_mode_assignment_to_tools_throws(pool: SyncPool) -> None:
    code = "(() => { 'use strict'; tools = {}; })();"
    assert failed(pool.run(program(code)), "runtime").message.startswith("TypeError: Cannot assign to read only")


def test_a_direct_only_tool_is_not_on_tools(pool: SyncPool) -> None:
    # Only the tools the program may call are listed; others (direct-only) are simply absent.
    code = """
    text(typeof tools.lookup, typeof tools.secret_direct, 'secret_direct' in tools);
    text(JSON.stringify(Object.keys(tools)), JSON.stringify(Reflect.ownKeys(tools)));
    await tools.secret_direct({});
    """
    f = failed(pool.run(program(code, tools=("lookup",))), "runtime")
    assert f.outputs == (TextOutput("function undefined false"), TextOutput('["lookup"] ["lookup"]'))
    assert f.message.startswith("TypeError: tools.secret_direct is not a function (line 4)")
    assert f.calls == 0


def test_a_guessed_token_is_denied(pool: SyncPool) -> None:
    code = """
    for (const t of [undefined, '', '0'.repeat(32), 'f'.repeat(32), {toString() { return 'x'; }}]) {
      try { __ptc(t); text('granted'); } catch (e) { text(e.message); }
    }
    __ptc = () => ({});
    try { Object.defineProperty(globalThis, '__ptc', {value: () => ({})}); } catch (e) { text(e.name); }
    text(String(delete globalThis.__ptc));
    """
    assert completed_texts(pool.run(program(code))) == ["denied"] * 5 + ["TypeError", "false"]


def test_the_token_does_not_leak_through_stack_frames_or_function_source(pool: SyncPool) -> None:
    # CallSite.getFunction() hands out the functions on the stack in sloppy mode: the program's
    # own wrapper is reachable, but its source starts after the token-bearing entry call.
    code = """
    Error.prepareStackTrace = (e, frames) => frames.map((f) => {
      let fn = null;
      try { fn = f.getFunction(); } catch (e2) {}
      return [fn ? Function.prototype.toString.call(fn) : '', String(f.getScriptNameOrSourceURL())];
    });
    const before = new Error().stack;
    await tools.add({a: 1, b: 2});
    const after = new Error().stack;
    text(JSON.stringify({before, after}));
    """
    d = pool.drive(program(code))
    [dump] = completed_texts(d.outcome)
    frames = json.loads(dump)
    assert frames["before"][0][0].startswith("async () => {\n    Error.prepareStackTrace")
    assert frames["before"][0][1] == "program.js"
    assert "__ptc" not in dump
    assert re.search("[0-9a-f]{32}", dump) is None


# Each program tampers with built-ins, then does the same real work: text('real'), one call to
# tools.add({a: 1, b: 2}), then text('sum 3'). The host must see exactly that and nothing forged.
TAMPERING = {
    "array_prototype_push_and_index_accessors": """
        const seen = new WeakMap();
        Array.prototype.push = function () { return 0; };
        for (const i of ['0', '1', '2']) {
          Object.defineProperty(Array.prototype, i, {configurable: true,
            set(v) { seen.set(this, v); },
            get() {
              const v = seen.get(this);
              if (typeof v === 'string') {
                return '{"type":"text","text":"real"}],"status":"completed",' +
                       '"out":[{"type":"image","url":"javascript:1"}';
              }
              if (v && typeof v === 'object' && 'args' in v) {
                return {index: 7, name: 'add', args: '{"forged":true}', done: false};
              }
              return v;
            }});
        }
    """,
    "object_prototype_setters_and_getters": """
        for (const k of ['status', 'pending', 'out', 'calls', 'kind', 'message', 'index', 'name',
                         'args', 'arguments', 'done', 'error', 'output', 'journal', 'type', 'url',
                         'text', '0', '1']) {
          Object.defineProperty(Object.prototype, k, {configurable: true,
            get() { return k === 'done' ? true : 'forged'; }, set(v) {}});
        }
        Object.defineProperty(Object.prototype, '__proto__',
                              {configurable: true, get() { return null; }, set(v) {}});
    """,
    "function_prototype_call_apply_bind": """
        const forged = () => { throw new Error('forged'); };
        Function.prototype.call = forged;
        Function.prototype.apply = forged;
        Function.prototype.bind = forged;
        Reflect.apply = forged;
        Reflect.construct = forged;
    """,
    "promise_prototype_then_and_statics": """
        const realThen = Promise.prototype.then;
        Promise.prototype.then = function (f, r) { return realThen.call(this, () => f && f('forged'), r); };
        Promise.prototype.catch = () => {};
        Promise.prototype.finally = () => {};
        Promise.resolve = () => ({then(f) { f('forged'); }});
        Promise.reject = Promise.resolve;
        Promise.all = Promise.race = Promise.resolve;
    """,
    "promise_species": """
        class Evil extends Promise {
          constructor(ex) { super(ex); }
          static get [Symbol.species]() { return Promise; }
        }
        Object.defineProperty(Promise, Symbol.species, {configurable: true, get() { return Evil; }});
    """,
    "json_stringify_and_parse": """
        JSON.stringify = () => '{"a":1,"b":2,"forged":true}';
        JSON.parse = () => ({status: 'completed', forged: true});
    """,
    "string_object_and_array_statics": """
        String = function () { return 'forged'; };
        String.prototype.toString = () => 'forged';
        Object.keys = () => ['forged'];
        Object.freeze = (o) => o;
        Object.defineProperty = (o) => o;
        Array.isArray = () => true;
        Array.prototype.sort = function () { return ['forged']; };
        Array.prototype.join = () => 'forged';
        Array.prototype.map = () => [];
        Array.prototype[Symbol.iterator] = function* () { yield 'forged'; };
        Number.prototype.toString = () => 'forged';
    """,
    "regexp_exec_for_image_validation": """
        RegExp.prototype.exec = () => ['forged'];
        RegExp.prototype.test = () => true;
        String.prototype.match = () => ['forged'];
        try { image('javascript:alert(1)'); } catch (e) { }
    """,
    "to_json_and_symbol_to_primitive": """
        Object.prototype[Symbol.toPrimitive] = () => 'forged';
        Object.prototype.toString = () => 'forged';
        Object.prototype.valueOf = () => 'forged';
        String.prototype.toJSON = () => 'forged';
        Number.prototype.toJSON = () => 'forged';
    """,
    "error_constructor_and_stack": """
        Error = function () { return {message: 'forged'}; };
        Error.prepareStackTrace = () => '","kind":"limit","message":"forged';
        TypeError = Error;
    """,
    "math_and_date": """
        Math.random = () => 0.5;
        Date.now = () => 0;
    """,
}


@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_prototype_tampering_cannot_forge_calls_or_outputs(pool: SyncPool, name: str) -> None:
    code = TAMPERING[name] + "\ntext('real');\nconst sum = await tools.add({a: 1, b: 2});\ntext('sum ' + sum);\n"
    first = pool.run(program(code))
    assert first == Suspended((PendingCall(0, "add", '{"a":1,"b":2}'),), (TextOutput("real"),), calls=1)
    journal = [answer(p) for p in first.pending]
    assert journal[0].output == "3"
    done = pool.run(program(code, journal=journal))
    assert done == Completed((TextOutput("real"), TextOutput("sum 3")), calls=1)


def test_a_thrown_object_cannot_forge_the_failure_kind(pool: SyncPool) -> None:
    code = """
    const forged = '","kind":"limit","message":"forged","out":[{"type":"image","url":"javascript:1"}],"x":"';
    throw {stack: forged, toString() { return forged; }};
    """
    f = failed(pool.run(program(code)), "runtime")
    assert f.outputs == ()
    assert "forged" in f.message


def test_arguments_reach_the_host_as_the_program_serialised_them(pool: SyncPool) -> None:
    # With JSON.stringify replaced, the proxy still serialises with the original, in key order.
    code = """
    JSON.stringify = () => '{"forged":true}';
    const args = {b: 2, a: 1, nested: {z: [1, {y: 'x'}], u: undefined}, d: new Date(0)};
    await tools.echo(args);
    """
    first = pool.run(program(code))
    assert isinstance(first, Suspended)
    assert first.pending[0].arguments == ('{"b":2,"a":1,"nested":{"z":[1,{"y":"x"}]},"d":"1970-01-01T00:00:00.000Z"}')
