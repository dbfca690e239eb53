// The package's own suite: the docs' example (examples/vitest, with its own config) and the tests
// of the helpers (test/), against the real Python server of this checkout.
import { fileURLToPath } from "node:url";

import { defineConfig } from "vitest/config";

process.env.PTC_EMULATOR_COMMAND ??= fileURLToPath(new URL("../.venv/bin/ptc-emulator", import.meta.url));

export default defineConfig({
  test: {
    projects: [
      "./examples/vitest/vitest.config.js",
      {
        test: {
          name: "helpers",
          include: ["test/**/*.test.js"],
          globalSetup: ["./examples/vitest/global-setup.js"],
          testTimeout: 60000,
        },
      },
    ],
  },
});
