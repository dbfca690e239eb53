module.exports = {
  testEnvironment: "ptc-emulator/jest-environment", // writes a failed test's trace files
  globalSetup: "./global-setup.cjs",
  globalTeardown: "./global-teardown.cjs",
  testMatch: ["**/*.test.cjs"],
};
