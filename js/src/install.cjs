"use strict";
// Which command starts the server: the one named (the `command` option, PTC_EMULATOR_COMMAND),
// else a Python environment this package makes and keeps itself when `install` names a wheel or a
// pip requirement, else `ptc-emulator` on PATH, else that environment with the release of the
// Python package this npm package was published with. The environment is made once per
// interpreter and install (`python3 -m venv` and pip, in the user's cache folder) and reused.

const { spawn } = require("node:child_process");
const crypto = require("node:crypto");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const { version: VERSION } = require("../package.json");

const COMMAND_ENV = "PTC_EMULATOR_COMMAND";
const INSTALL_ENV = "PTC_EMULATOR_INSTALL";
const PYTHON_ENV = "PTC_EMULATOR_PYTHON";
const CACHE_ENV = "PTC_EMULATOR_CACHE";
const PACKAGE = "ptc-emulator";
const READY = "ptc-emulator-env.json";
const OUTPUT_CHARS = 6000;

function words(text, name) {
  const list = String(text).trim().split(/\s+/).filter(Boolean);
  if (list.length === 0) throw new Error(`${name} is empty: name the ptc-emulator command`);
  return list;
}

/** The command's argv from the `command` option or PTC_EMULATOR_COMMAND; null when neither is set. */
function namedCommand(option) {
  if (Array.isArray(option)) return [...option];
  if (option != null) return words(option, "the `command` option");
  const text = process.env[COMMAND_ENV];
  return text != null && text !== "" ? words(text, COMMAND_ENV) : null;
}

/** The full path of `name` found on PATH as an executable file, else null. */
function onPath(name, env = process.env) {
  const exts = process.platform === "win32" ? (env.PATHEXT ?? ".EXE;.CMD;.BAT").split(";") : [""];
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const file = path.join(dir, name + ext);
      try {
        fs.accessSync(file, fs.constants.X_OK);
        if (fs.statSync(file).isFile()) return file;
      } catch {
        // not here
      }
    }
  }
  return null;
}

function cacheRoot(option) {
  const given = option ?? process.env[CACHE_ENV];
  if (given) return path.resolve(given);
  if (process.env.XDG_CACHE_HOME) return path.join(process.env.XDG_CACHE_HOME, PACKAGE);
  if (process.platform === "darwin") return path.join(os.homedir(), "Library", "Caches", PACKAGE);
  if (process.platform === "win32" && process.env.LOCALAPPDATA) {
    return path.join(process.env.LOCALAPPDATA, PACKAGE, "Cache");
  }
  return path.join(os.homedir(), ".cache", PACKAGE);
}

function note(line) {
  process.stderr.write(`ptc-emulator: ${line}\n`);
}

function envPython(dir) {
  return process.platform === "win32" ? path.join(dir, "Scripts", "python.exe") : path.join(dir, "bin", "python");
}

/** Run a program to its end; resolves to { code, output } (stdout and stderr, the last part kept). */
function run(file, args, { env } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env: env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const keep = (chunk) => {
      output = (output + chunk).slice(-OUTPUT_CHARS);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.once("error", reject);
    child.once("close", (code, signal) => resolve({ code: code ?? signal, output }));
  });
}

/** The interpreter's executable and version, or a rejection that says what to set. */
async function interpreter(python) {
  const probe = "import json, sys; print(json.dumps([sys.executable, list(sys.version_info[:3])]))";
  const hint = `set ${PYTHON_ENV} (or the \`python\` option) to a Python 3.11+, or ${COMMAND_ENV} to a ptc-emulator command`;
  let done;
  try {
    done = await run(python, ["-c", probe]);
  } catch (e) {
    throw new Error(`\`${python}\`, which would install the ptc-emulator server, cannot run (${e.message}): ${hint}`);
  }
  const line = done.output.trim().split("\n").pop();
  let executable, version;
  try {
    [executable, version] = JSON.parse(line);
  } catch {
    throw new Error(`\`${python}\` did not run as Python (${hint}):\n${done.output}`);
  }
  if (version[0] < 3 || (version[0] === 3 && version[1] < 11)) {
    throw new Error(`\`${python}\` is Python ${version.join(".")}; the ptc-emulator server needs 3.11+: ${hint}`);
  }
  return { executable, version };
}

/** What pip installs: a wheel file (by its absolute path, keyed by its content), a folder (by its
 *  absolute path) or a requirement, and what tells one environment from another. */
function installSpec(install) {
  const spec = install ?? `${PACKAGE}==${VERSION}`;
  const file = path.resolve(spec);
  const stat = fs.statSync(file, { throwIfNoEntry: false });
  if (stat?.isFile()) {
    const digest = crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");
    return { spec: file, key: `${file}@sha256:${digest}` };
  }
  if (stat?.isDirectory()) return { spec: file, key: file };
  if (/\.whl$/i.test(spec)) throw new Error(`the wheel to install is not there: ${file}`);
  return { spec, key: spec };
}

/**
 * [python, "-m", "ptc_emulator"] of the environment for `install` (default: this package's own
 * release of the Python package), made on first use. Made in a fresh folder and renamed into
 * place once complete, so concurrent runs never see a half-made one: the first rename wins, the
 * others discard theirs.
 */
async function managedCommand({ install, python, cacheDir }) {
  const { spec, key } = installSpec(install);
  const interp = await interpreter(python ?? process.env[PYTHON_ENV] ?? "python3");
  const root = cacheRoot(cacheDir);
  const id = crypto
    .createHash("sha256")
    .update(JSON.stringify([VERSION, key, interp.executable, interp.version]))
    .digest("hex")
    .slice(0, 16);
  const dir = path.join(root, `env-${VERSION}-py${interp.version.slice(0, 2).join(".")}-${id}`);
  const command = [envPython(dir), "-m", "ptc_emulator"];
  if (fs.existsSync(path.join(dir, READY))) return command;

  fs.mkdirSync(root, { recursive: true });
  const work = fs.mkdtempSync(path.join(root, ".making-"));
  note(`installing ${spec} with ${interp.executable} into ${dir} (once: later runs reuse it)`);
  try {
    const venv = await run(interp.executable, ["-m", "venv", work]);
    if (venv.code !== 0) {
      const hint = /ensurepip/.test(venv.output) ? " (Debian and Ubuntu: apt install python3-venv)" : "";
      throw new Error(`\`${interp.executable} -m venv\` failed${hint}:\n${venv.output}`);
    }
    const pipArgs = ["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off", spec];
    const pip = await run(envPython(work), pipArgs);
    if (pip.code !== 0) throw new Error(`pip could not install ${spec}:\n${pip.output}`);
    const record = { spec, python: interp.executable, pythonVersion: interp.version.join("."), npmVersion: VERSION };
    fs.writeFileSync(path.join(work, READY), `${JSON.stringify(record, null, 2)}\n`);
    if (fs.existsSync(dir) && !fs.existsSync(path.join(dir, READY))) {
      fs.rmSync(dir, { recursive: true, force: true }); // not one of ours: they are renamed in complete
    }
    try {
      fs.renameSync(work, dir);
    } catch (e) {
      if (!fs.existsSync(path.join(dir, READY))) throw e;
      fs.rmSync(work, { recursive: true, force: true }); // another run made it meanwhile
    }
  } catch (e) {
    fs.rmSync(work, { recursive: true, force: true });
    throw e;
  }
  note(`installed: ${dir}`);
  return command;
}

/** The argv before `serve`, in the order the file's header says. */
async function resolveCommand(options = {}) {
  const named = namedCommand(options.command);
  if (named) return named;
  const install = options.install ?? (process.env[INSTALL_ENV] || undefined);
  if (install === undefined && onPath(PACKAGE)) return [PACKAGE];
  return managedCommand({ install, python: options.python, cacheDir: options.cacheDir });
}

module.exports = { COMMAND_ENV, INSTALL_ENV, PYTHON_ENV, CACHE_ENV, VERSION, onPath, resolveCommand };
