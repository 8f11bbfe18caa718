#!/usr/bin/env node
import { existsSync } from "node:fs";
import { runCli } from "../cli.js";
import { P02 } from "../core/profiles.js";

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
  { name: "ch02", title: "agent-tutorial 第 2 章: 工具注册表、五个工具与工作区路径安全", profile: P02 },
);
