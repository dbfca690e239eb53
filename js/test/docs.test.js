// docs/javascript.md shows the example files verbatim (the suite runs those files, and the test
// files it shows), and every file of js/examples/ is shown.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { expect, test } from "vitest";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const DOC = readFileSync(path.join(REPO, "docs", "javascript.md"), "utf8");

function shown() {
  const blocks = new Map();
  const pattern = /<!-- file: (\S+) -->\n`\1`:\n\n```\w*\n([\s\S]*?)^```$/gm;
  for (const [, file, body] of DOC.matchAll(pattern)) blocks.set(file, body);
  return blocks;
}

test("the docs show each example file as it is", () => {
  const blocks = shown();
  expect(blocks.size).toBe((DOC.match(/<!-- file: /g) ?? []).length);
  for (const [file, body] of blocks) expect(body, file).toBe(readFileSync(path.join(REPO, file), "utf8"));
});

test("every example file is in the docs", () => {
  const files = readdirSync(path.join(REPO, "js", "examples"), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(REPO, path.join(entry.parentPath, entry.name)))
    .sort();
  const examples = [...shown().keys()].filter((file) => file.startsWith("js/examples/"));
  expect(examples.sort()).toEqual(files); // the others are test files the page shows (js/test/)
});
