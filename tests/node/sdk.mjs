// Which installed npm `openai` the scripts here import, so the same scripts run against each:
//
//   OPENAI_SDK=openai-v6 node --import ./sdk.mjs seed_loop.mjs
//
// OPENAI_SDK names a package of package.json (`openai`, the newest, or an npm alias such as
// `openai-v6`); the scripts' `import ... from "openai"` and `"openai/..."` then load that package.
// Imports made inside node_modules are left alone (@openai/agents keeps the `openai` it depends on).
// With OPENAI_SDK_REPORT set, the version the scripts got (the package's own VERSION, imported
// through the same redirection) is written to that file as JSON: {"package", "version"}.
import { writeFileSync } from "node:fs";
import { register } from "node:module";

const target = process.env.OPENAI_SDK ?? "openai";
if (!/^[a-z0-9][a-z0-9._-]*$/.test(target)) throw new Error(`OPENAI_SDK is not a package name: ${target}`);
if (target !== "openai") register("./sdk_hooks.mjs", import.meta.url, { data: { target } });

const { VERSION } = await import("openai/version");
if (process.env.OPENAI_SDK_REPORT) {
  writeFileSync(process.env.OPENAI_SDK_REPORT, JSON.stringify({ package: target, version: VERSION }));
}
