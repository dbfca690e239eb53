/** The variable startEmulator() sets to the server's /v1 URL, and emulatorScope() reads. */
export declare const URL_ENV: "PTC_EMULATOR_URL";
/** The variable naming the command that starts the server (see StartOptions.command). */
export declare const COMMAND_ENV: "PTC_EMULATOR_COMMAND";
/** The variable holding the API key a server requires (and the helpers send). */
export declare const API_KEY_ENV: "PTC_EMULATOR_API_KEY";
/** The variable naming where failed tests' trace files go (see StartOptions.traces). */
export declare const TRACES_ENV: "PTC_EMULATOR_TRACES";

export interface StartOptions {
  /** The command that runs the Python CLI, `serve ...` is appended: an argv array, or words
   *  split on spaces. Default: PTC_EMULATOR_COMMAND; without either, `install` (below), else
   *  `ptc-emulator` found on PATH, else the server installed into an environment of its own. */
  command?: string | string[];
  /** What to install into the package's own Python environment and run: a wheel file's path or a
   *  pip requirement (default PTC_EMULATOR_INSTALL; without it, `ptc-emulator` on PATH is used
   *  when there is one, else `ptc-emulator==<this package's version>`). Made once, then reused. */
  install?: string;
  /** The Python 3.11+ that makes that environment (default PTC_EMULATOR_PYTHON, else `python3`). */
  python?: string;
  /** Where such environments are kept (default PTC_EMULATOR_CACHE, else the user's cache folder:
   *  $XDG_CACHE_HOME/ptc-emulator or ~/.cache/ptc-emulator; ~/Library/Caches on macOS). */
  cacheDir?: string;
  /** More `ptc-emulator serve` arguments, e.g. `["--fixtures", "tests/scenarios"]`. */
  args?: string[];
  /** Use a server that is already running (its URL, with or without /v1) instead of starting
   *  one; default PTC_EMULATOR_URL when it is set. stop() leaves such a server running. */
  url?: string;
  /** The key the server requires (PTC_EMULATOR_API_KEY if set); any key works when it requires none. */
  apiKey?: string;
  /** The port to bind; default 0, a free one the server picks. */
  port?: number;
  /** V8 worker processes of the server. */
  workers?: number;
  /** The server's log level (default "warning"); its output is kept, see Emulator.log(). */
  logLevel?: string;
  cwd?: string;
  /** Variables added to the server's environment. */
  env?: Record<string, string>;
  /** How long the server may take to print its URL and become healthy (default 60000). */
  timeoutMs?: number;
  /** Where a failed test's trace files go (`<name>-<sha8>.html` and `.json`, as the pytest plugin
   *  writes them), relative to the working directory; "off" for none. Default PTC_EMULATOR_TRACES,
   *  else `.ptc-emulator/traces`. The start removes an earlier run's traces from there. */
  traces?: string;
}

export declare class Emulator {
  private constructor();
  /** The server's root URL, e.g. http://127.0.0.1:41234 */
  readonly rootURL: string;
  /** The unscoped OpenAI base URL, e.g. http://127.0.0.1:41234/v1 */
  readonly url: string;
  readonly port: number;
  readonly apiKey: string;
  /** The server's process id (and its process group's); undefined for a server given by `url`. */
  readonly pid: number | undefined;
  /** The server's temporary data directory (removed when it stops); undefined for a server given by `url`. */
  readonly dataDir: string | undefined;
  /** The server's last lines of output. */
  log(): string;
  /** Stop the server and wait until no process of its group is left. */
  stop(options?: { timeoutMs?: number }): Promise<void>;
}

/** Start the server (once per run: a second call returns the running one), wait for its health
 *  check, and set process.env.PTC_EMULATOR_URL to its /v1 URL. */
export declare function startEmulator(options?: StartOptions): Promise<Emulator>;
/** Stop the server startEmulator() started; nothing if none runs. */
export declare function stopEmulator(options?: { timeoutMs?: number }): Promise<void>;

/** A tool call a response carried (or one the server answered itself, MCP and the like). */
export interface Call {
  /** The tool's name (an MCP tool's name without its server label). */
  name: string;
  /** The output item's type (`function_call`, `custom_tool_call`, `mcp_call`, ...). */
  type: string;
  /** Made by a program (`caller.type: "program"`) or directly by the model. */
  route: "direct" | "program";
  /** The arguments, parsed from JSON when they are JSON; null when the journal has none. */
  arguments: unknown;
  callId: string | null;
  serverLabel?: string;
  status?: string;
  /** The request the call came back in: its place in this scope's journal, from 1 (as the
   *  assertion messages number them), and its journal-wide `seq`. */
  request: number;
  seq: number;
  responseId: string | null;
  scenario: string | null;
}

/** One request in the journal (see docs/pytest.md for every field). */
export interface JournalEntry {
  seq: number;
  at: number;
  scope: string | null;
  method: string;
  path: string;
  status: number;
  request: unknown;
  response: any;
  response_id: string | null;
  scenario: string | null;
  route: string[];
  figures: Record<string, unknown>;
  near_miss: { input?: string; near_misses: { scenario: string; field: string; reason: string }[] } | null;
  contract: Record<string, unknown>[];
  fault: string | null;
  conversation: string | null;
  hosted_calls: Record<string, unknown>[];
  [field: string]: unknown;
}

export interface ScenarioListing {
  name: string;
  source: string;
  scope: string | null;
  priority: number;
  turns: number;
}

/** What `expectCalled()` counts: `times` calls (at least one when left out) whose arguments include
 *  `args` (an object's entries, recursively) or satisfy it, made by `route` (either when left out). */
export interface CalledOptions {
  times?: number;
  args?: Record<string, unknown> | unknown[] | ((args: unknown) => boolean);
  route?: "direct" | "program";
}

/** What `expectRequests()` counts: `times` requests (at least one when left out) that have all
 *  that is given. A string pattern is made a RegExp. */
export interface RequestsOptions {
  times?: number;
  /** Found in the request's `instructions` or one of its system or developer messages. */
  instructions?: RegExp | string;
  /** Found in the request's latest user message. */
  input?: RegExp | string;
  /** Matching the request's whole `model`. */
  model?: RegExp | string;
  /** The scenario that answered it. */
  scenario?: string;
  status?: number;
  where?: (entry: JournalEntry) => boolean;
}

export interface ScopeOptions {
  name?: string;
  /** The server's URL; default process.env.PTC_EMULATOR_URL (set by startEmulator()). */
  url?: string;
  apiKey?: string;
}

/** The error the expect* assertions throw: its message shows what happened in the scope. */
export declare class EmulatorAssertionError extends Error {}

export declare class EmulatorScope {
  constructor(name?: string, options?: ScopeOptions);
  /** The scope's name (given, or made from the test's name and a random suffix). */
  readonly name: string;
  readonly rootURL: string;
  /** The scoped OpenAI base URL: http://127.0.0.1:PORT/scopes/<name>/v1 */
  readonly baseURL: string;
  /** The scoped admin API: http://127.0.0.1:PORT/scopes/<name>/_emulator */
  readonly adminURL: string;
  readonly apiKey: string;
  /** The trace inspector's page for this scope. */
  readonly inspectorURL: string;
  /** OPENAI_BASE_URL and OPENAI_API_KEY for a child process or a default client. */
  readonly env: { OPENAI_BASE_URL: string; OPENAI_API_KEY: string };
  /** Put `env` into `target` (default process.env); returns a function that restores it. */
  applyEnv(target?: Record<string, string | undefined>): () => void;
  /** Add a scenario for this scope (an object, or a YAML scenario file's text); returns its name. */
  addScenario(scenario: Record<string, unknown> | string, options?: { name?: string }): Promise<string>;
  removeScenario(name: string): Promise<void>;
  /** What this scope can match, in order: its own scenarios, then the unscoped ones. */
  scenarios(): Promise<ScenarioListing[]>;
  journal(): Promise<JournalEntry[]>;
  /** The tool calls made in this scope, oldest first; only tool `name`'s when given. */
  calls(name?: string): Promise<Call[]>;
  /** The requests that matched no scenario. */
  unmatched(): Promise<JournalEntry[]>;
  /** Rejects unless `name` was called `times` times (at least once when not given), counting only
   *  the calls with these `args` and `route` when given; resolves to the count. */
  expectCalled(name: string, times?: number): Promise<number>;
  expectCalled(name: string, options: CalledOptions): Promise<number>;
  /** Rejects unless `times` requests of this scope (at least one when not given) have all that is
   *  given; resolves to those journal entries. */
  expectRequests(options?: RequestsOptions): Promise<JournalEntry[]>;
  /** Rejects unless every scenario added in this scope was matched by a request. */
  expectAllScenariosUsed(): Promise<void>;
  /** Rejects if a request in this scope matched no scenario. */
  expectNoUnmatched(): Promise<void>;
  /** The requests of this scope and their calls, as the assertion messages show them. */
  describe(): Promise<string>;
  /** Results for the tools that run on OpenAI's side, for this scope: `{ mcp_servers, code_interpreter,
   *  shell }` (docs/tools-hosted.md); null removes them. */
  setHosted(script: Record<string, unknown> | null): Promise<void>;
  clearJournal(): Promise<void>;
  /** Forget this scope's scenarios and journal. */
  reset(): Promise<void>;
}

/** One test's scope on the emulator. */
export declare function emulatorScope(name?: string, options?: ScopeOptions): EmulatorScope;
export declare function emulatorScope(options: ScopeOptions): EmulatorScope;
