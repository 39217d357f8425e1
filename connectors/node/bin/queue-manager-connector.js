#!/usr/bin/env node
// The install check from the command line:
//   queue-manager-connector verify --server https://queue.example.com --room launch
//                                  [--url https://shop.example.com/shop/] [--api-key KEY]
// prints the server's checks (GET /api/v1/verify with connector=node&version=) and exits 1
// unless every check passed. The key may also come from QM_API_KEY, which keeps it out of the
// shell's history.
"use strict";

const { verify, VERSION } = require("../index.js");

const USAGE =
  "usage: queue-manager-connector verify --server <url> --room <roomId> [--url <page>] [--api-key <key>]";

function parse(argv) {
  const [command, ...rest] = argv;
  const flags = {};
  for (let i = 0; i < rest.length; i += 1) {
    const arg = rest[i];
    if (!arg.startsWith("--")) throw new Error(`unexpected argument ${arg}`);
    const eq = arg.indexOf("=");
    if (eq > 0) {
      flags[arg.slice(2, eq)] = arg.slice(eq + 1);
    } else {
      if (i + 1 >= rest.length) throw new Error(`${arg} needs a value`);
      flags[arg.slice(2)] = rest[i + 1];
      i += 1;
    }
  }
  return { command, flags };
}

async function main() {
  let parsed;
  try {
    parsed = parse(process.argv.slice(2));
  } catch (error) {
    console.error(`${error.message}\n${USAGE}`);
    return 2;
  }
  const { command, flags } = parsed;
  if (command === "--version" || command === "version") {
    console.log(VERSION);
    return 0;
  }
  if (command !== "verify" || !flags.server || !(flags.room || flags.roomId)) {
    console.error(USAGE);
    return 2;
  }
  let report;
  try {
    report = await verify({
      server: flags.server,
      roomId: flags.room || flags.roomId,
      url: flags.url,
      apiKey: flags["api-key"] || process.env.QM_API_KEY,
    });
  } catch (error) {
    console.error(`queue-manager-connector: ${error.message}`);
    return 1;
  }
  for (const check of report.checks) {
    console.log(`${check.status.toUpperCase().padEnd(4)} ${check.id}: ${check.title}`);
    if (check.status === "fail" && check.fix) console.log(`     fix: ${check.fix}`);
  }
  console.log(report.ok ? "ok: the install is ready" : "not ok: fix the failing checks above");
  return report.ok ? 0 : 1;
}

main().then((code) => {
  process.exitCode = code;
});
