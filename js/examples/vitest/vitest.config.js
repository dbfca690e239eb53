import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globalSetup: ["./global-setup.js"],
    testTimeout: 30000, // an agent in a child process takes a moment to start
  },
});
