#!/usr/bin/env node
import { existsSync } from "node:fs";
import { runCli } from "../cli.js";
import { P03 } from "../core/profiles.js";

// A .env beside where npm runs (the repository root) holds the key for readers who prefer a file.
if (existsSync(".env")) process.loadEnvFile(".env");

// Node's types claim `isTTY` is always a boolean; on a pipe it is simply absent.
const isTTY = (stream: { isTTY?: boolean }): boolean => stream.isTTY === true;

process.exitCode = await runCli(
  process.argv.slice(2),
  {
    env: process.env,
    cwd: process.cwd(),
    stdin: process.stdin,
    stdinIsTTY: isTTY(process.stdin),
    stdout: process.stdout,
    stderr: process.stderr,
    stderrIsTTY: isTTY(process.stderr),
  },
  { name: "ch03", title: "agent-tutorial 第 3 章: 副作用之前的权限策略 (边界、规则、审批、审计)", profile: P03 },
);
