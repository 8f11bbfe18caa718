#!/usr/bin/env node
import { processIO, runCli } from "../cli.js";
import { P01 } from "../core/profiles.js";

process.exitCode = await runCli(process.argv.slice(2), processIO(), {
  name: "ch01",
  title: "agent-tutorial 第 1 章: 智能体循环 + 一个工具 (PowerShell), 每次调用都需确认",
  profile: P01,
});
