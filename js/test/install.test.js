// Which command starts the server, and the Python environment the package makes when no command
// is named and `ptc-emulator` is not on PATH (or `install` names what to install). pip runs for
// real here, offline: on a small wheel this test writes, and on requirements that no index given
// to it holds, which shows what the package asked pip for. The whole path, from the built wheel
// to a Vitest run in a fresh project, is tests/packaging/test_dist.py's.
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterEach, beforeEach, expect, test, vi } from "vitest";

const require = createRequire(import.meta.url);
const { VERSION, onPath, resolveCommand } = require("../src/install.cjs");
const { version } = require("../package.json");

const SAVED = ["PATH", "PTC_EMULATOR_COMMAND", "PTC_EMULATOR_INSTALL", "PTC_EMULATOR_PYTHON", "PTC_EMULATOR_CACHE", "PIP_NO_INDEX", "PIP_FIND_LINKS"];
let saved;
let dirs;

beforeEach(() => {
  saved = Object.fromEntries(SAVED.map((name) => [name, process.env[name]]));
  dirs = [];
  delete process.env.PTC_EMULATOR_COMMAND; // make test-js names this checkout's command
  delete process.env.PTC_EMULATOR_INSTALL;
});

afterEach(() => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true }));
  vi.restoreAllMocks();
});

function tempDir(name) {
  const dir = mkdtempSync(path.join(tmpdir(), `ptc-emulator-${name}-`));
  dirs.push(dir);
  return dir;
}

/** PATH less every folder holding a `ptc-emulator` command. */
function pathWithout() {
  return process.env.PATH.split(path.delimiter)
    .filter((dir) => dir && !onPath("ptc-emulator", { PATH: dir }))
    .join(path.delimiter);
}

/** A folder holding a `ptc-emulator` command (a real one would do no more here: it is not run). */
function folderWithCommand() {
  const dir = tempDir("bin");
  writeFileSync(path.join(dir, "ptc-emulator"), "#!/bin/sh\nexit 3\n", { mode: 0o755 });
  return dir;
}

/** pip with no index but an empty folder of links: nothing from a registry can be found. */
function offline() {
  process.env.PIP_NO_INDEX = "1";
  process.env.PIP_FIND_LINKS = tempDir("links");
}

function stderrLines() {
  const lines = [];
  vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
    lines.push(String(chunk));
    return true;
  });
  return lines;
}

test("the npm package's version is the one it installs the Python package at", () => {
  expect(VERSION).toBe(version);
});

test("a named command comes first: the option, then PTC_EMULATOR_COMMAND", async () => {
  process.env.PTC_EMULATOR_COMMAND = "python3 -m ptc_emulator";
  expect(await resolveCommand({ command: "uvx ptc-emulator" })).toEqual(["uvx", "ptc-emulator"]);
  expect(await resolveCommand({ command: ["/opt/bin/ptc-emulator"] })).toEqual(["/opt/bin/ptc-emulator"]);
  expect(await resolveCommand({ install: "x.whl" })).toEqual(["python3", "-m", "ptc_emulator"]);
});

test("with nothing named, `ptc-emulator` on PATH runs", async () => {
  process.env.PATH = `${folderWithCommand()}${path.delimiter}${pathWithout()}`;
  expect(await resolveCommand({})).toEqual(["ptc-emulator"]);
});

test("not on PATH, the Python package of this version is installed from the registry", { timeout: 120000 }, async () => {
  process.env.PATH = pathWithout();
  process.env.PTC_EMULATOR_CACHE = tempDir("cache");
  offline();
  const notes = stderrLines();

  const failure = await resolveCommand({}).catch((e) => e);

  expect(failure.message).toContain(`pip could not install ptc-emulator==${version}:`);
  expect(failure.message).toContain(`No matching distribution found for ptc-emulator==${version}`);
  expect(notes.join("")).toContain(`ptc-emulator: installing ptc-emulator==${version} with `);
  expect(readdirSync(process.env.PTC_EMULATOR_CACHE)).toEqual([]); // the half-made one is gone
});

test("an `install` named wins over `ptc-emulator` on PATH", { timeout: 120000 }, async () => {
  process.env.PATH = `${folderWithCommand()}${path.delimiter}${process.env.PATH}`;
  process.env.PTC_EMULATOR_INSTALL = "ptc-emulator==0.0.1";
  offline();
  stderrLines();

  const failure = await resolveCommand({ cacheDir: tempDir("cache") }).catch((e) => e);

  expect(failure.message).toContain("No matching distribution found for ptc-emulator==0.0.1");
});

test("a wheel that is not there, or a Python that cannot run, fails and says what to set", async () => {
  const missing = await resolveCommand({ install: "/nonexistent/ptc_emulator-0.1.0-py3-none-any.whl" }).catch((e) => e);
  expect(missing.message).toBe("the wheel to install is not there: /nonexistent/ptc_emulator-0.1.0-py3-none-any.whl");

  const noPython = await resolveCommand({ install: "ptc-emulator", python: "/nonexistent/python3" }).catch((e) => e);
  expect(noPython.message).toContain("`/nonexistent/python3`, which would install the ptc-emulator server, cannot run");
  expect(noPython.message).toContain("set PTC_EMULATOR_PYTHON (or the `python` option) to a Python 3.11+");
});

/** A real wheel of one module, `tiny` (tiny.ANSWER is `answer`), written with Python's zipfile. */
async function tinyWheel(answer, file = path.join(tempDir("wheel"), "tiny-1.0-py3-none-any.whl")) {
  const script = `
import base64, hashlib, sys, zipfile
files = {
    "tiny.py": f"ANSWER = {sys.argv[2]}\\n",
    "tiny-1.0.dist-info/METADATA": "Metadata-Version: 2.1\\nName: tiny\\nVersion: 1.0\\n",
    "tiny-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: hand\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
def digest(text):
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
record = "".join(f"{name},sha256={digest(text)},{len(text.encode())}\\n" for name, text in files.items())
files["tiny-1.0.dist-info/RECORD"] = record + "tiny-1.0.dist-info/RECORD,,\\n"
with zipfile.ZipFile(sys.argv[1], "w") as wheel:
    for name, text in files.items():
        wheel.writestr(name, text)
`;
  await promisify(execFile)("python3", ["-c", script, file, String(answer)]);
  return file;
}

test("runs that need the same environment at once make it once, and later runs reuse it", { timeout: 300000 }, async () => {
  const wheel = await tinyWheel(42);
  const cacheDir = tempDir("cache");
  const notes = stderrLines();

  const [a, b] = await Promise.all([resolveCommand({ install: wheel, cacheDir }), resolveCommand({ install: wheel, cacheDir })]);

  expect(a).toEqual(b);
  const [python, ...rest] = a;
  expect(rest).toEqual(["-m", "ptc_emulator"]);
  const made = readdirSync(cacheDir);
  expect(made).toEqual([path.basename(path.dirname(path.dirname(python)))]); // one, and no half-made one
  expect(made[0]).toMatch(new RegExp(`^env-${version.replaceAll(".", "\\.")}-py3\\.\\d+-[0-9a-f]{16}$`));
  const answer = async (command) => (await promisify(execFile)(command[0], ["-c", "import tiny; print(tiny.ANSWER)"])).stdout.trim();
  expect(await answer(a)).toBe("42");
  const record = JSON.parse(readFileSync(path.join(cacheDir, made[0], "ptc-emulator-env.json"), "utf8"));
  expect(record).toMatchObject({ spec: wheel, npmVersion: version });
  expect(notes.join("")).toContain(`ptc-emulator: installing ${wheel} with `);

  notes.length = 0;
  expect(await resolveCommand({ install: wheel, cacheDir })).toEqual(a);
  expect(notes).toEqual([]); // nothing installed again

  // The same path with another build in it is another environment.
  await tinyWheel(43, wheel);
  const rebuilt = await resolveCommand({ install: wheel, cacheDir });
  expect(rebuilt).not.toEqual(a);
  expect(await answer(rebuilt)).toBe("43");
  expect(readdirSync(cacheDir)).toHaveLength(2);
});
